package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/ranges"
)

// produceSplitsBody is the body of TypeProduceSplits.
type produceSplitsBody struct {
	Job    string                `cbor:"1,keyasint"`
	Worker string                `cbor:"2,keyasint"`
	Epoch  int64                 `cbor:"3,keyasint"`
	Splits []ranges.SplitEmitted `cbor:"4,keyasint"`
	// JobID: as leaseSplitsBody's.
	JobID uint64 `cbor:"5,keyasint,omitempty"`
}

// newProduceSplits reports that worker has emitted every element of the
// given splits of epoch of an exactly-once DYNAMIC job, with the indices
// it emitted (splits.DynamicState.Produce). Result: splits.Progress.
func newProduceSplits(job, worker string, epoch int64, done []ranges.SplitEmitted) Command {
	return newCommand(TypeProduceSplits, 1, produceSplitsBody{Job: job, Worker: worker, Epoch: epoch, Splits: done})
}

// NewProduceSplitsOfJob is newProduceSplits from a task of the job with
// ID jobID, as NewLeaseSplitsOfJob.
func NewProduceSplitsOfJob(job string, jobID uint64, worker string, epoch int64, done []ranges.SplitEmitted) Command {
	return newCommand(TypeProduceSplits, 1, produceSplitsBody{Job: job, Worker: worker, Epoch: epoch, Splits: done, JobID: jobID})
}

func applyProduceSplits(s *State, c Command) (any, error) {
	var b produceSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, false)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(j, b.JobID); err != nil {
		return nil, err
	}
	if len(b.Splits) > MaxReceipts {
		return nil, fmt.Errorf("%w: %d splits, limit %d", ErrInvalidCommand, len(b.Splits), MaxReceipts)
	}
	if err := j.Dynamic.Produce(b.Worker, b.Epoch, b.Splits); err != nil {
		return nil, fmt.Errorf("job %q: %w", b.Job, err)
	}
	return j.Dynamic.Progress(), nil
}
