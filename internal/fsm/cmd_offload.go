package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api/jobspec"
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
	// the job's OffloadBoundary is set, and the splits leased from then
	// on carry it (splits.Lease.Cut), so that their workers run the
	// prefix and ship single elements. Allowed once, in an exactly-once
	// job whose only consumer asks and that has no cut yet; asking again
	// for the same cut changes nothing (a retry).
	Cut int `cbor:"7,keyasint,omitempty"`
}

// The values of OffloadBody.Remote.
const (
	RemoteUnchanged = ""
	RemoteOn        = "on"
	RemoteOff       = "off"
)

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
	cut := j.Options
	if b.Cut != 0 {
		var err error
		if cut, err = checkCutMidJob(j, b, c.Version); err != nil {
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
		case !ok && len(j.Workers) >= maxJobWorkers:
			return nil, fmt.Errorf("%w: job %q has had %d workers", ErrLimit, b.Job, len(j.Workers))
		case !ok:
			j.Workers[name] = WorkerState{Since: c.At}
		}
	}
	// The cut is set only now that nothing of the command can be
	// refused: a refused command changes nothing.
	j.Options = cut
	if (b.Remote != RemoteUnchanged && (j.RemoteOff() || b.Remote == RemoteOff)) || b.Report != nil {
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
// cannot be set, and returns the job's options with it; applyOffload sets
// them once the whole command passes.
func checkCutMidJob(j *Job, b OffloadBody, version uint16) (jobspec.Job, error) {
	switch {
	case version < 2:
		return jobspec.Job{}, fmt.Errorf("%w: Offload v%d with a cut (v2)", ErrInvalidCommand, version)
	case b.Cut < 0 || b.Cut > jobspec.MaxOffloadBoundary:
		return jobspec.Job{}, fmt.Errorf("%w: offload cut %d (want 1..%d)", ErrInvalidCommand, b.Cut, jobspec.MaxOffloadBoundary)
	case j.Options.OffloadBoundary() == b.Cut:
		return j.Options, nil // a retry
	case j.Options.OffloadBoundary() != 0:
		return jobspec.Job{}, fmt.Errorf("%w: job %q is cut after %d ops already; a cut is set once", ErrInvalidCommand, j.Name, j.Options.OffloadBoundary())
	case !j.Dynamic.ExactlyOnce():
		return jobspec.Job{}, fmt.Errorf("%w: job %q: a cut needs exactly-once delivery (the consumer seeds the ops after it from each element's provenance)", ErrInvalidCommand, j.Name)
	case len(j.Consumers) != 1:
		return jobspec.Job{}, fmt.Errorf("%w: job %q has %d consumers: only a job's only consumer cuts it while it runs (each consumer runs the ops after the cut)", ErrInvalidCommand, j.Name, len(j.Consumers))
	}
	cut, err := j.Options.WithOffloadBoundary(b.Cut)
	if err != nil {
		return jobspec.Job{}, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, j.Name, err)
	}
	return cut, nil
}
