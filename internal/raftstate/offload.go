package raftstate

import (
	"fmt"
	"maps"
	"math"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Offload (the client's FastFlow-style offload, client/offload.go): a
// consumer of a DYNAMIC job may run a local worker in its own process,
// which leases splits beside the nodes under the name
// jobspec.LocalWorkerName(consumer), and may keep the nodes from taking the
// job's splits (RemoteOff) while its own host prepares everything. The
// local worker lives as long as its consumer: when the consumer detaches
// or its lease expires, the worker is expired with it. Exactly-once, its
// unsettled splits are then orphaned and, since nothing it made can reach
// any other consumer, leased again without waiting for a fence.

// TypeOffload: NewOffload (body: OffloadBody). Numbered away from the
// others so that commands added beside it on other branches do not clash.
const TypeOffload CommandType = 47

// OffloadState is a job's offload state; nil when no consumer asked.
type OffloadState struct {
	// RemoteOff: the nodes take no split of the job (they are not
	// assigned it, and those assigned get empty leases) until a consumer
	// turns them on again.
	RemoteOff bool `cbor:"1,keyasint,omitempty" json:"remote_off,omitempty"`
	// Reports are each attached consumer's last offload report.
	Reports map[string]OffloadReport `cbor:"2,keyasint,omitempty" json:"reports,omitempty"`
}

// OffloadReport is what a consumer tells `feedmesh jobs` of its offload.
type OffloadReport struct {
	Mode      string  `cbor:"1,keyasint" json:"mode"`
	Fraction  float64 `cbor:"2,keyasint" json:"fraction"`
	Cut       int     `cbor:"3,keyasint,omitempty" json:"cut,omitempty"`
	Predicted float64 `cbor:"4,keyasint,omitempty" json:"predicted,omitempty"`
	Measured  float64 `cbor:"5,keyasint,omitempty" json:"measured,omitempty"`
	Local     int64   `cbor:"6,keyasint,omitempty" json:"local,omitempty"`
	Remote    int64   `cbor:"7,keyasint,omitempty" json:"remote,omitempty"`
	Stall     float64 `cbor:"8,keyasint,omitempty" json:"stall,omitempty"`
	Reason    string  `cbor:"9,keyasint,omitempty" json:"reason,omitempty"`
}

// Validate bounds a report.
func (r OffloadReport) Validate() error {
	for _, f := range []float64{r.Fraction, r.Predicted, r.Measured, r.Stall} {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return fmt.Errorf("offload report %+v: rates and fractions must be finite and >= 0", r)
		}
	}
	if len(r.Mode) > MaxNameBytes || len(r.Reason) > MaxFailureBytes || r.Local < 0 || r.Remote < 0 || r.Cut < 0 {
		return fmt.Errorf("offload report: mode of %d bytes, reason of %d (limits %d, %d), counts %d/%d, cut %d",
			len(r.Mode), len(r.Reason), MaxNameBytes, MaxFailureBytes, r.Local, r.Remote, r.Cut)
	}
	return nil
}

// The values of OffloadBody.Remote.
const (
	RemoteUnchanged = ""
	RemoteOn        = "on"
	RemoteOff       = "off"
)

// OffloadBody is the body of TypeOffload.
type OffloadBody struct {
	Job      string `cbor:"1,keyasint"`
	Consumer string `cbor:"2,keyasint"`
	// LocalWorker assigns the consumer's local worker to the job.
	LocalWorker bool `cbor:"3,keyasint,omitempty"`
	// Remote turns the nodes' part off or on (RemoteOn, RemoteOff), or
	// leaves it (RemoteUnchanged).
	Remote string         `cbor:"4,keyasint,omitempty"`
	Report *OffloadReport `cbor:"5,keyasint,omitempty"`
	// Retire expires the consumer's local worker while the consumer
	// stays (exactly-once only): its leased and unsettled splits are
	// orphaned until the consumer fences it, then read by the nodes with
	// what the consumer receipted excluded. Retiring one that is gone (or
	// never was) changes nothing.
	Retire bool `cbor:"6,keyasint,omitempty"`
	// Cut (version 2) cuts the job's pipeline after that many ops from
	// now on (offload auto's "which ops", decided once the job runs):
	// JobOptions.OffloadBoundary is set, and the splits leased from then
	// on carry it (splits.Lease.Cut), so that their workers run the
	// prefix and ship single elements. Allowed once, in an exactly-once
	// job whose only consumer asks and that has no cut yet; asking again
	// for the same cut changes nothing (a retry).
	Cut int `cbor:"7,keyasint,omitempty"`
}

// NewOffload is a consumer's offload request: version 2 when it cuts the
// pipeline, so that a log that never cuts stays readable by older nodes.
func NewOffload(b OffloadBody) Command {
	v := uint16(1)
	if b.Cut != 0 {
		v = 2
	}
	return newCommand(TypeOffload, v, b)
}

func applyOffload(s *State, c Command) (any, error) {
	var b OffloadBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if j.Dynamic == nil || j.Group || j.ShareGroup != "" || j.Rounds != nil {
		return nil, fmt.Errorf("%w: job %q: offload needs sharding dynamic without share or coordinated reads", ErrInvalidCommand, b.Job)
	}
	if _, ok := j.Consumers[b.Consumer]; !ok {
		return nil, fmt.Errorf("%w: consumer %q is not attached to job %q", ErrNotAssigned, b.Consumer, b.Job)
	}
	switch b.Remote {
	case RemoteUnchanged, RemoteOn, RemoteOff:
	default:
		return nil, fmt.Errorf("%w: offload remote %q: want %q, %q or empty", ErrInvalidCommand, b.Remote, RemoteOn, RemoteOff)
	}
	if b.Report != nil {
		if err := b.Report.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	if b.Cut != 0 {
		if err := checkCutMidJob(j, b, c.Version); err != nil {
			return nil, err
		}
	}
	name := jobspec.LocalWorkerName(b.Consumer)
	if b.Retire {
		switch {
		case b.LocalWorker:
			return nil, fmt.Errorf("%w: offload: assign and retire a local worker at once", ErrInvalidCommand)
		case !j.Dynamic.ExactlyOnce():
			return nil, fmt.Errorf("%w: job %q: retiring a local worker needs exactly-once delivery (at-most-once would lose its splits)", ErrInvalidCommand, b.Job)
		}
		if st, ok := j.Workers[name]; ok && !st.Expired {
			st.Expired = true
			j.Workers[name] = st
			// Only its own consumer received from it: only its fence is
			// awaited.
			j.Dynamic.ExpireWorker(name, []string{b.Consumer})
		}
	}
	if b.LocalWorker {
		st, ok := j.Workers[name]
		switch {
		case ok && st.Expired:
			return nil, fmt.Errorf("%w: the local worker of consumer %q was expired from job %q", ErrNotAssigned, b.Consumer, b.Job)
		case !ok && len(j.Workers) >= MaxJobWorkers:
			return nil, fmt.Errorf("%w: job %q has had %d workers", ErrLimit, b.Job, len(j.Workers))
		case !ok:
			j.Workers[name] = WorkerState{Since: c.At}
		}
	}
	if b.Cut != 0 {
		// Set only now that nothing of the command can be refused: a
		// refused command changes nothing.
		j.Options.OffloadBoundary = b.Cut
	}
	if (b.Remote != RemoteUnchanged && (j.remoteOff() || b.Remote == RemoteOff)) || b.Report != nil {
		if j.Offload == nil {
			j.Offload = &OffloadState{}
		}
		if b.Remote != RemoteUnchanged {
			j.Offload.RemoteOff = b.Remote == RemoteOff
		}
		if b.Report != nil {
			if j.Offload.Reports == nil {
				j.Offload.Reports = map[string]OffloadReport{}
			}
			j.Offload.Reports[b.Consumer] = *b.Report
		}
	}
	return nil, nil
}

// checkCutMidJob refuses a running job's cut (OffloadBody.Cut) that
// cannot be set; applyOffload sets it once the whole command passes.
func checkCutMidJob(j *Job, b OffloadBody, version uint16) error {
	switch {
	case version < 2:
		return fmt.Errorf("%w: Offload v%d with a cut (v2)", ErrInvalidCommand, version)
	case b.Cut < 0 || b.Cut > MaxOffloadBoundary:
		return fmt.Errorf("%w: offload cut %d (want 1..%d)", ErrInvalidCommand, b.Cut, MaxOffloadBoundary)
	case j.Options.OffloadBoundary == b.Cut:
		return nil // a retry
	case j.Options.OffloadBoundary != 0:
		return fmt.Errorf("%w: job %q is cut after %d ops already; a cut is set once", ErrInvalidCommand, j.Name, j.Options.OffloadBoundary)
	case !j.Dynamic.ExactlyOnce():
		return fmt.Errorf("%w: job %q: a cut needs exactly-once delivery (the consumer seeds the ops after it from each element's provenance)", ErrInvalidCommand, j.Name)
	case len(j.Consumers) != 1:
		return fmt.Errorf("%w: job %q has %d consumers: only a job's only consumer cuts it while it runs (each consumer runs the ops after the cut)", ErrInvalidCommand, j.Name, len(j.Consumers))
	}
	return nil
}

// remoteOff reports whether the nodes must leave the job's splits alone.
func (j *Job) remoteOff() bool { return j.Offload != nil && j.Offload.RemoteOff }

// offloadLease is the lease a node gets while the job's remote part is
// off: nothing, not done (it asks again later), unless every split is
// produced (then the real lease, which tells it to end).
func offloadLease(j *Job, worker string) (splits.Lease, bool) {
	if _, local := jobspec.LocalWorkerOf(worker); local || !j.remoteOff() || j.Dynamic.AllProduced() || j.Dynamic.CensusWaiting() {
		return splits.Lease{}, false
	}
	return splits.Lease{Epoch: j.Dynamic.Epoch}, true
}

// departLocalWorker expires a departing consumer's local worker (called
// once the consumer has left j.Consumers and its Depart is applied) and
// forgets its report. No fence is awaited: what the local worker made
// reached only its consumer, which is gone.
func departLocalWorker(j *Job, consumer string) {
	if j.Offload != nil {
		delete(j.Offload.Reports, consumer)
	}
	name := jobspec.LocalWorkerName(consumer)
	st, ok := j.Workers[name]
	if !ok || st.Expired {
		return
	}
	st.Expired = true
	j.Workers[name] = st
	switch {
	case j.Dynamic == nil:
	case j.Dynamic.Tracked():
		j.Dynamic.ExpireWorker(name, nil)
	default:
		j.Dynamic.Expire(name)
	}
}

// cloneOffload is a deep copy.
func (o *OffloadState) clone() *OffloadState {
	if o == nil {
		return nil
	}
	c := *o
	c.Reports = maps.Clone(o.Reports)
	return &c
}
