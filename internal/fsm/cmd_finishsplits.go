package fsm

import (
	"fmt"
)

// finishSplitsBody is the body of TypeFinishSplits.
type finishSplitsBody struct {
	Job    string  `cbor:"1,keyasint"`
	Worker string  `cbor:"2,keyasint"`
	Epoch  int64   `cbor:"3,keyasint"`
	IDs    []int64 `cbor:"4,keyasint"`
}

// NewFinishSplits reports that worker finished ids of epoch in a DYNAMIC
// job. Every id must be outstanding for the worker (else the command is
// rejected, wrapping splits.ErrNotLeased, and nothing changes; a retry of a
// Finish that did commit gets that error). Result: splits.Progress after
// the command.
func NewFinishSplits(job, worker string, epoch int64, ids []int64) Command {
	return newCommand(TypeFinishSplits, 1, finishSplitsBody{Job: job, Worker: worker, Epoch: epoch, IDs: ids})
}

func applyFinishSplits(s *State, c Command) (any, error) {
	var b finishSplitsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.dynamicJobOf(b.Job, b.Worker, false)
	if err != nil {
		return nil, err
	}
	if len(b.IDs) > maxFinishSplits {
		return nil, fmt.Errorf("%w: %d split ids, limit %d", ErrInvalidCommand, len(b.IDs), maxFinishSplits)
	}
	if err := j.Dynamic.Finish(b.Worker, b.Epoch, b.IDs); err != nil {
		return nil, fmt.Errorf("job %q: %w", b.Job, err)
	}
	return j.Dynamic.Progress(), nil
}
