package fsm

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
	if len(r.Mode) > maxNameBytes || len(r.Reason) > MaxFailureBytes || r.Local < 0 || r.Remote < 0 || r.Cut < 0 {
		return fmt.Errorf("offload report: mode of %d bytes, reason of %d (limits %d, %d), counts %d/%d, cut %d",
			len(r.Mode), len(r.Reason), maxNameBytes, MaxFailureBytes, r.Local, r.Remote, r.Cut)
	}
	return nil
}

// RemoteOff reports whether the nodes must leave the job's splits alone.
func (j *Job) RemoteOff() bool { return j.Offload != nil && j.Offload.RemoteOff }

// offloadLease is the lease a node gets while the job's remote part is
// off: nothing, not done (it asks again later), unless every split is
// produced (then the real lease, which tells it to end).
func offloadLease(j *Job, worker string) (splits.Lease, bool) {
	if _, local := jobspec.LocalWorkerOf(worker); local || !j.RemoteOff() || j.Dynamic.AllProduced() || j.Dynamic.CensusWaiting() {
		return splits.Lease{}, false
	}
	return splits.Lease{Epoch: j.Dynamic.Epoch}, true
}

// IdleLease is the lease LeaseSplits would give worker now (its request
// of incarnation, for the job of id jobID) when the job's remote part is
// off and the command would change nothing: a node the job's consumer
// keeps off its splits (offload local) asks for leases on its poll, and
// the leader answers those from its state, without a Raft command (mesh's
// lease). ok is false whenever the command could do more (a new
// incarnation, a dismissed or unassigned worker, a replaced job, the
// remote part on, every split produced): LeaseSplits must then be
// applied. The state may be a little stale (a leader's): the lease is
// empty and not done, so the worker only asks again later.
func (s *State) IdleLease(job string, jobID uint64, worker string, incarnation uint64) (l splits.Lease, ok bool) {
	j, err := s.dynamicJobOf(job, worker, true)
	if err != nil || checkJobID(j, jobID) != nil {
		return splits.Lease{}, false
	}
	if st := j.Workers[worker]; st.Dismissed || incarnation != 0 && incarnation != st.Incarnation {
		return splits.Lease{}, false
	}
	return offloadLease(j, worker)
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
