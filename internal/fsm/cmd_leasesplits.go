package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// leaseSplitsBody is the body of TypeLeaseSplits.
type leaseSplitsBody struct {
	Job       string `cbor:"1,keyasint"`
	Worker    string `cbor:"2,keyasint"`
	RequestID uint64 `cbor:"3,keyasint"`
	N         int    `cbor:"4,keyasint"`
	// Incarnation (version 2 only) identifies the worker process asking.
	Incarnation uint64 `cbor:"5,keyasint,omitempty"`
	// JobID, when set, is the job the worker's task runs: a lease for a
	// job since replaced under the same name (a resume) is refused.
	JobID uint64 `cbor:"6,keyasint,omitempty"`
	// Prefer (version 3) is the splits the worker would rather read (its
	// autocache holds them): handed out first (splits.LeasePreferring).
	// At most MaxPreferIntervals intervals.
	Prefer ranges.Set `cbor:"7,keyasint,omitempty"`
	// RunsCensus (version 4) says the worker, a consumer's local worker,
	// runs a census: it may be leased one (splits.DynamicState.LeaseAs).
	RunsCensus bool `cbor:"8,keyasint,omitempty"`
}

// MaxPreferIntervals bounds leaseSplitsBody.Prefer.
const MaxPreferIntervals = 256

// NewLeaseSplits leases up to n splits of a DYNAMIC job to worker, which
// must be assigned and live (ErrNotAssigned). n is clamped to
// [1, splits.MaxLease]; workers size it by their pipeline's rate
// (mesh/leasepolicy.go). requestID
// makes a retry safe: the same (worker, requestID) as the worker's last
// lease returns that lease again. Epochs advance inside this command (see
// splits.DynamicState): there is no separate AdvanceEpoch. Result:
// splits.Lease.
func NewLeaseSplits(job, worker string, requestID uint64, n int) Command {
	return newCommand(TypeLeaseSplits, 1, leaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n})
}

// NewLeaseSplitsAs is LeaseSplits version 2: NewLeaseSplits from one
// incarnation of the worker (a number that grows with each start of its
// process, such as its start time; 0 behaves as version 1). A worker that
// restarts under the same name before it is declared dead would otherwise
// hold its old process's leases for good: nobody reads them, nobody
// expires them. So the first lease of a newer incarnation first counts the
// worker's outstanding leases as lost (at most once: the old process may
// have delivered part of them), as ExpireWorker would, but keeps the
// worker in the job. A lease from an older incarnation than the last seen
// (a request of the dead process still on its way) is rejected with
// ErrNotAssigned.
func NewLeaseSplitsAs(job, worker string, incarnation, requestID uint64, n int) Command {
	return newCommand(TypeLeaseSplits, 2, leaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n, Incarnation: incarnation})
}

// NewLeaseSplitsOfJob is NewLeaseSplitsAs from a task of the job with ID
// jobID (0: unchecked): refused with ErrNotAssigned once a job resumed
// from checkpoints has replaced it under its name.
func NewLeaseSplitsOfJob(job string, jobID uint64, worker string, incarnation, requestID uint64, n int) Command {
	return NewLeaseSplitsPreferring(job, jobID, worker, incarnation, requestID, n, nil)
}

// NewLeaseSplitsPreferring is NewLeaseSplitsOfJob for a worker that would
// rather read the splits in prefer (those its autocache holds): the
// current epoch's splits in prefer not handed out yet come first, ahead of
// the leases' cursor (splits.DynamicState.LeasePreferring). Version 3 when
// prefer is not empty.
func NewLeaseSplitsPreferring(job string, jobID uint64, worker string, incarnation, requestID uint64, n int, prefer ranges.Set) Command {
	v := uint16(2)
	if len(prefer) > 0 {
		v = 3
	}
	return newCommand(TypeLeaseSplits, v, leaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n, Incarnation: incarnation, JobID: jobID, Prefer: prefer})
}

// NewLeaseSplitsCensus is NewLeaseSplitsPreferring from a local worker
// that runs a census (version 4: a cluster at ProtocolLocalCensus; a
// node runs censuses whatever its lease says).
func NewLeaseSplitsCensus(job string, jobID uint64, worker string, incarnation, requestID uint64, n int, prefer ranges.Set) Command {
	return newCommand(TypeLeaseSplits, 4, leaseSplitsBody{Job: job, Worker: worker, RequestID: requestID, N: n, Incarnation: incarnation, JobID: jobID, Prefer: prefer, RunsCensus: true})
}

func applyLeaseSplits(s *State, c Command) (any, error) {
	var b leaseSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if c.Version < 2 && b.Incarnation != 0 {
		return nil, fmt.Errorf("%w: LeaseSplits v1 with an incarnation", ErrInvalidCommand)
	}
	if b.RunsCensus && c.Version < 4 {
		return nil, fmt.Errorf("%w: LeaseSplits v%d that runs a census (v4)", ErrInvalidCommand, c.Version)
	}
	if len(b.Prefer) > 0 {
		if c.Version < 3 {
			return nil, fmt.Errorf("%w: LeaseSplits v%d with preferred splits (v3)", ErrInvalidCommand, c.Version)
		}
		if err := b.Prefer.Validate(); err != nil || b.Prefer.Intervals() > MaxPreferIntervals {
			return nil, fmt.Errorf("%w: preferred splits: %d intervals (limit %d), %v", ErrInvalidCommand, b.Prefer.Intervals(), MaxPreferIntervals, err)
		}
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, true)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	dismissed := j.Workers[b.Worker].Dismissed
	if st := j.Workers[b.Worker]; b.Incarnation != 0 && b.Incarnation != st.Incarnation {
		if b.Incarnation < st.Incarnation {
			return nil, fmt.Errorf("%w: worker %q in job %q: incarnation %d was superseded by %d (a restart)",
				ErrNotAssigned, b.Worker, b.Job, b.Incarnation, st.Incarnation)
		}
		if st.Incarnation != 0 {
			expireLeases(j, b.Worker) // the previous process's leases: lost, or orphaned
		}
		st.Incarnation = b.Incarnation
		j.Workers[b.Worker] = st
		if dismissed {
			// The restart's leases are settled as above; the next lease
			// is refused, and the new process drains (cmd_allocatejob.go).
			return splits.Lease{}, nil
		}
	}
	if dismissed {
		return nil, fmt.Errorf("%w: worker %q of job %q (autoscaling gave it back)", ErrDismissed, b.Worker, b.Job)
	}
	if l, off := offloadLease(j, b.Worker); off {
		return l, nil
	}
	l := j.Dynamic.LeaseAs(b.Worker, b.RequestID, min(max(b.N, 1), maxLeaseSplits), b.Prefer, b.RunsCensus)
	l.Cut = j.Options.OffloadBoundary() // the job's cut now (a retry's answer carries the cut in force)
	return l, nil
}
