package fsm

import (
	"fmt"
)

// garbageCollectJobBody is the body of TypeGarbageCollectJob.
type garbageCollectJobBody struct {
	Job string `cbor:"1,keyasint"`
}

// NewGarbageCollectJob removes job. It is rejected with ErrJobInUse while
// a consumer is attached or until the job has been without one for its
// GCAfter, measured with the command's At (Job.gcDue). A missing job is not
// an error. Datasets are kept. Result: bool, whether the job existed.
func NewGarbageCollectJob(job string) Command {
	return newCommand(TypeGarbageCollectJob, 1, garbageCollectJobBody{Job: job})
}

func applyGarbageCollectJob(s *State, c Command) (any, error) {
	var b garbageCollectJobBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkName("job name", b.Job); err != nil {
		return nil, err
	}
	j, ok := s.Jobs[b.Job]
	if !ok {
		return false, nil
	}
	if j.Group {
		if s.groupReferenced(b.Job) {
			return nil, fmt.Errorf("%w: share group %q is read by a job", ErrJobInUse, b.Job)
		}
		delete(s.Jobs, b.Job)
		return true, nil
	}
	if len(j.Consumers) > 0 {
		return nil, fmt.Errorf("%w: job %q has %d consumers", ErrJobInUse, b.Job, len(j.Consumers))
	}
	if !j.gcDue(c.At) {
		return nil, fmt.Errorf("%w: job %q has had no consumer for %v of its gc_after %v",
			ErrJobInUse, b.Job, timeDiff(c.At, j.NoConsumersSince), j.Options.GCAfter())
	}
	delete(s.Jobs, b.Job)
	if g := j.ShareGroup; g != "" && !s.groupReferenced(g) {
		delete(s.Jobs, g) // its last job is gone: so are its leases
	}
	return true, nil
}
