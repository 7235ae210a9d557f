package fsm

import (
	"fmt"
	"strings"
)

// A worker tells the leader when its task of a job ends: its data ended
// (every epoch of OFF and STATIC, or its DYNAMIC leases), or its pipeline
// failed (a corrupt file, a bad op). The job's state (State) follows from
// it: the cluster would otherwise not know that an OFF or STATIC job has
// finished, and a failure would be known only to the consumers reading
// when it happened, not to `feedmesh jobs`.

// endTaskBody is the body of TypeEndTask.
type endTaskBody struct {
	Job    string `cbor:"1,keyasint"`
	Worker string `cbor:"2,keyasint"`
	// Failure is the task's error; empty when its data ended.
	Failure string `cbor:"3,keyasint,omitempty"`
	// JobID, when set, is the job the task ran: the end of a task of a
	// job since replaced under its name is refused (ErrNotAssigned).
	JobID uint64 `cbor:"4,keyasint,omitempty"`
}

// newEndTask records that worker's task of job ended: with failure "" its
// data ended; otherwise it failed with that error (cut to
// MaxFailureBytes), and the job is failed for as long as it exists. Only
// the first failure is kept. Idempotent. Result: bool, whether the command
// changed the job.
func newEndTask(job, worker, failure string) Command {
	return NewEndTaskOfJob(job, 0, worker, failure)
}

// NewEndTaskOfJob is newEndTask from a task of the job with ID jobID (0:
// unchecked): refused with ErrNotAssigned once a job resumed from
// checkpoints has replaced it under its name.
func NewEndTaskOfJob(job string, jobID uint64, worker, failure string) Command {
	if len(failure) > MaxFailureBytes {
		failure = strings.ToValidUTF8(failure[:MaxFailureBytes-3], "") + "..."
	}
	return newCommand(TypeEndTask, 1, endTaskBody{Job: job, Worker: worker, Failure: failure, JobID: jobID})
}

func applyEndTask(s *State, c Command) (any, error) {
	var b endTaskBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if err := checkName("worker id", b.Worker); err != nil {
		return nil, err
	}
	if len(b.Failure) > MaxFailureBytes {
		return nil, fmt.Errorf("%w: failure of %d bytes, limit %d", ErrInvalidCommand, len(b.Failure), MaxFailureBytes)
	}
	// A worker not assigned to the job (a task started by a consumer's
	// stream before or without an assignment) has no end to record, but
	// its failure is the job's all the same: its consumers got it.
	st, ok := j.Workers[b.Worker]
	changed := false
	if ok && !st.Ended {
		st.Ended = true
		j.Workers[b.Worker] = st
		changed = true
	}
	if b.Failure != "" && j.Failure == nil {
		j.Failure = &JobFailure{Worker: b.Worker, Reason: b.Failure, At: c.At}
		changed = true
	}
	return changed, nil
}
