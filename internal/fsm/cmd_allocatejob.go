package fsm

import (
	"fmt"
	"slices"
)

// Dismissing workers: how an autoscaling job gives a node back, for a
// scale-down of its own or for another job's fair share
// (the leader's allocation, internal/plan). The leader proposes AllocateJob with the workers to
// release; each is marked Dismissed in the job at once, so that it counts
// no more toward the job's worker count and its next lease is refused
// (ErrDismissed). The worker then drains its task as a graceful shutdown
// would (internal/worker: drain.go, dismiss.go): it hands the splits it has not
// started back to the job's other workers (HandBackSplits), reads the
// split in progress to its end, waits until the consumers' receipts
// settle what it produced (exactly-once), and records the drain
// (DrainTask). Only then is its node free: the planner gives it to
// another job, or back to this one (NewRejoinTask), never while it still
// holds a split of the job. Nothing is lost and nothing is read twice,
// for the same reasons as a drain: a handed-back split was never started,
// and the split in progress is read by the worker that started it.
//
// A worker dismissed and gone before it drained (it died) is expired as
// any other: its splits are read again (exactly-once) or lost
// (at-most-once).

// allocateJobBody is the body of TypeAllocateJob.
type allocateJobBody struct {
	Job string `cbor:"1,keyasint"`
	// Allotted is how many nodes the allocation gives the job.
	Allotted int `cbor:"2,keyasint"`
	// Reason says why (its own nodes, or a fair share and of what).
	Reason string `cbor:"3,keyasint"`
	// Dismiss lists the workers the job gives back.
	Dismiss []string `cbor:"4,keyasint,omitempty"`
}

// maxAllocationReason bounds allocateJobBody.Reason.
const maxAllocationReason = 512

// NewAllocateJob records that the leader gives job share nodes, for
// reason, and dismisses the given workers from it (see the top of this
// file). The job must autoscale; each dismissed worker must be assigned,
// neither expired nor dismissed already, and one worker at least must
// stay. From its first AllocateJob on, a job follows the allocation:
// its policy scales down, and waits for a worker it asked for before
// measuring it (stepScale). Result: nil.
func NewAllocateJob(job string, allotted int, reason string, dismiss []string) Command {
	return newCommand(TypeAllocateJob, 1, allocateJobBody{Job: job, Allotted: allotted, Reason: reason, Dismiss: dismiss})
}

func applyAllocateJob(s *State, c Command) (any, error) {
	var b allocateJobBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if j.Scale == nil || !j.Rejoinable() {
		return nil, fmt.Errorf("%w: job %q does not autoscale", ErrInvalidCommand, b.Job)
	}
	if len(b.Reason) > maxAllocationReason || b.Allotted < 0 || b.Allotted > maxJobWorkers || len(b.Dismiss) > maxJobWorkers {
		return nil, fmt.Errorf("%w: allocation of job %q: share %d, reason of %d bytes, %d releases", ErrInvalidCommand, b.Job, b.Allotted, len(b.Reason), len(b.Dismiss))
	}
	for i, w := range b.Dismiss {
		st, ok := j.Workers[w]
		if !ok || st.Expired || st.Dismissed || slices.Contains(b.Dismiss[:i], w) {
			return nil, fmt.Errorf("%w: worker %q of job %q: not assigned, expired or released already", ErrNotAssigned, w, b.Job)
		}
	}
	if len(b.Dismiss) > 0 && j.ActiveWorkers()-len(b.Dismiss) < 1 {
		return nil, fmt.Errorf("%w: releasing %d of job %q's %d workers would leave it none", ErrLimit, len(b.Dismiss), b.Job, j.ActiveWorkers())
	}
	for _, w := range b.Dismiss {
		st := j.Workers[w]
		st.Dismissed = true
		j.Workers[w] = st
	}
	j.Scale.Allocated = true
	j.Scale.Allotted, j.Scale.Allocation = b.Allotted, b.Reason
	return nil, nil
}
