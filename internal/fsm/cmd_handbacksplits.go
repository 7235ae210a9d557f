package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// handBackSplitsBody is the body of TypeHandBackSplits.
type handBackSplitsBody struct {
	Job    string  `cbor:"1,keyasint"`
	Worker string  `cbor:"2,keyasint"`
	Epoch  int64   `cbor:"3,keyasint"`
	IDs    []int64 `cbor:"4,keyasint"`
	// JobID: as leaseSplitsBody's.
	JobID uint64 `cbor:"5,keyasint,omitempty"`
}

// NewHandBackSplits returns splits of epoch that worker leased and has not
// started reading, from a task of the job with ID jobID (0: unchecked), so
// that other workers read them: a drain (splits.DynamicState.HandBack).
// It is refused with an error wrapping splits.ErrHandBackRefused when no
// other worker would take them: the worker is the job's last live one, or
// (at-most-once) everything is handed out. Result: splits.Progress.
func NewHandBackSplits(job string, jobID uint64, worker string, epoch int64, ids []int64) Command {
	return newCommand(TypeHandBackSplits, 1, handBackSplitsBody{Job: job, Worker: worker, Epoch: epoch, IDs: ids, JobID: jobID})
}

func applyHandBackSplits(s *State, c Command) (any, error) {
	var b handBackSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, true)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if len(b.IDs) > maxLeaseSplits {
		return nil, fmt.Errorf("%w: %d split ids, limit %d", ErrInvalidCommand, len(b.IDs), maxLeaseSplits)
	}
	if j.servingWorkers() < 2 {
		return nil, fmt.Errorf("job %q: %w: %q is its only worker that is neither expired nor drained", b.Job, splits.ErrHandBackRefused, b.Worker)
	}
	if err := j.Dynamic.HandBack(b.Worker, b.Epoch, b.IDs); err != nil {
		return nil, fmt.Errorf("job %q: %w", b.Job, err)
	}
	return j.Dynamic.Progress(), nil
}
