package fsm

import (
	"fmt"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// assignTaskBody is the body of TypeAssignTask.
type assignTaskBody struct {
	Job    string `cbor:"1,keyasint"`
	Worker string `cbor:"2,keyasint"`
}

// NewAssignTask assigns worker a task for job. It is idempotent. ErrLimit
// if MaxWorkers live workers are assigned already; ErrNotAssigned if the
// job is STATIC and worker is not in its StaticWorkers, or if worker was
// expired from the job. Result: bool, whether the worker was newly
// assigned.
//
// Version 2 (this one): a worker expired from a job is out of it for good.
// ExpireWorker counted the splits it held as lost, and the job's consumers
// drop a worker they see expired and never read it again, so a worker put
// back into the job would lease splits that no consumer reads: a loss that
// nobody counts. It also stays expired in the job's share group when it is
// assigned to another job of that group (it cannot lease there, so that
// job gets its end of data at once), and is never put back into a
// coordinated job's rotation. A restarted node serves the jobs it was not
// expired from. Version 1 assigned an expired worker again, in the job and
// its share group.
func NewAssignTask(job, worker string) Command {
	return newCommand(TypeAssignTask, 2, assignTaskBody{Job: job, Worker: worker})
}

func applyAssignTask(s *State, c Command) (any, error) {
	var b assignTaskBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("worker id", b.Worker); err != nil {
		return nil, err
	}
	st, known := j.Workers[b.Worker]
	if known && !st.Expired {
		return false, nil
	}
	if known && c.Version >= 2 {
		return nil, fmt.Errorf("%w: worker %q was expired from job %q (declared dead, the splits it held counted lost) and does not rejoin it: its consumers have dropped it",
			ErrNotAssigned, b.Worker, b.Job)
	}
	if j.Options.Sharding() == jobspec.Static {
		if _, ok := slices.BinarySearch(j.StaticWorkers, b.Worker); !ok {
			return nil, fmt.Errorf("%w: job %q is static over %v, chosen at creation; %q is not among them",
				ErrNotAssigned, b.Job, j.StaticWorkers, b.Worker)
		}
	}
	if mw := j.ScaledLimit(); mw > 0 {
		if live := j.ActiveWorkers(); live >= mw {
			return nil, fmt.Errorf("%w: job %q has %d live workers (its limit: max_workers, or what autoscaling chose, %d)", ErrLimit, b.Job, live, mw)
		}
	}
	if !known && len(j.Workers) >= maxJobWorkers {
		return nil, fmt.Errorf("%w: job %q has had %d workers", ErrLimit, b.Job, len(j.Workers))
	}
	j.Workers[b.Worker] = WorkerState{Since: c.At}
	s.assignShareGroup(j, b.Worker, c.At, c.Version >= 2)
	if j.Rounds != nil {
		j.Rounds.addWorker(b.Worker)
	}
	return true, nil
}
