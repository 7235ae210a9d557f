package fsm

import (
	"fmt"
)

// drainTaskBody is the body of TypeDrainTask.
type drainTaskBody struct {
	Job    string `cbor:"1,keyasint"`
	Worker string `cbor:"2,keyasint"`
	// JobID: as leaseSplitsBody's (drain only).
	JobID uint64 `cbor:"3,keyasint,omitempty"`
	// Incarnation is the draining process's (drain only).
	Incarnation uint64 `cbor:"4,keyasint,omitempty"`
	// Rejoin: a later process of the worker rejoins the job.
	Rejoin bool `cbor:"5,keyasint,omitempty"`
}

// NewDrainTask records that worker's process incarnation drained its task
// of a DYNAMIC job before a graceful shutdown (mesh/drain.go): it holds no
// split of the job, leased or produced and not settled. Expiring the worker
// then loses nothing, and a later process of the node rejoins the job
// (NewRejoinTask). Refused while the worker holds a split. Result: nil.
func NewDrainTask(job string, jobID uint64, worker string, incarnation uint64) Command {
	return newCommand(TypeDrainTask, 1, drainTaskBody{Job: job, JobID: jobID, Worker: worker, Incarnation: incarnation})
}

// NewRejoinTask gives a job back to a worker that drained or was expired
// from it (the leader plans it when a newer process of the node is alive:
// the process that drained, or was declared dead, holds nothing of the job
// any more): it is assigned afresh (Since is the command's At), and its
// consumers, who took the old process's end of data or dropped it, open
// streams to it again (a consumer of an exactly-once job fences the old
// process first). DYNAMIC jobs only, and not coordinated or sharing ones,
// whose workers are tied to rounds or a share group (an OFF job would
// deliver the whole dataset again). Result: nil.
//
// Version 2 (this one) keeps the worker's last incarnation across the
// rejoin: a lease from the old process still on its way is then refused
// as superseded once the new process has leased, and the new process's
// first lease expires whatever the old one held with an incarnation
// change its consumers see (they fence the old process on it). Version 1
// reset it to 0, so such a lease was taken as the new process's, and its
// splits were orphaned behind a fence no consumer knew to send.
func NewRejoinTask(job, worker string) Command {
	return newCommand(TypeDrainTask, 2, drainTaskBody{Job: job, Worker: worker, Rejoin: true})
}

func applyDrainTask(s *State, c Command) (any, error) {
	var b drainTaskBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if b.Rejoin {
		j, err := s.jobOf(b.Job)
		if err != nil {
			return nil, err
		}
		st, ok := j.Workers[b.Worker]
		if !ok || !(st.Drained || st.Expired) || !j.Rejoinable() {
			return nil, fmt.Errorf("%w: worker %q of job %q is not drained or expired, or the job's workers are fixed: it does not rejoin", ErrNotAssigned, b.Worker, b.Job)
		}
		if mw := j.ScaledLimit(); mw > 0 && (st.Expired || st.Dismissed) && j.ActiveWorkers() >= mw {
			return nil, fmt.Errorf("%w: job %q has %d live workers (max_workers %d)", ErrLimit, b.Job, j.ActiveWorkers(), mw)
		}
		ws := WorkerState{Since: c.At}
		if c.Version >= 2 {
			ws.Incarnation = st.Incarnation
		}
		j.Workers[b.Worker] = ws
		return nil, nil
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, true)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if j.Group || j.Rounds != nil || j.ShareGroup != "" {
		return nil, fmt.Errorf("%w: job %q is shared or coordinated: its tasks do not drain", ErrInvalidCommand, b.Job)
	}
	if held := j.Dynamic.Held()[b.Worker]; held > 0 {
		return nil, fmt.Errorf("%w: worker %q still holds %d splits of job %q", ErrNotAssigned, b.Worker, held, b.Job)
	}
	st := j.Workers[b.Worker]
	st.Drained = true
	st.Incarnation = max(st.Incarnation, b.Incarnation)
	j.Workers[b.Worker] = st
	return nil, nil
}
