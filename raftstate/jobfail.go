package raftstate

import (
	"fmt"
	"strings"
)

// A job fails when one of its workers' pipelines fails (a corrupt file, a
// bad op): the worker ends its consumers' streams with the error, and
// records the failure here so that the job's state says so to anyone who
// asks (`feedmesh jobs`), not only to the consumers that were reading.

// FailJobBody is the body of TypeFailJob.
type FailJobBody struct {
	Job    string `cbor:"1,keyasint"`
	Worker string `cbor:"2,keyasint"`
	Reason string `cbor:"3,keyasint"`
}

// NewFailJob records that worker's task of job failed with reason (cut to
// MaxFailureBytes), so that the job shows as failed, and why, for as long as
// it exists. Only the first failure is kept: later ones succeed and change
// nothing. Result: bool, whether this command recorded the failure.
func NewFailJob(job, worker, reason string) Command {
	if len(reason) > MaxFailureBytes {
		reason = strings.ToValidUTF8(reason[:MaxFailureBytes-3], "") + "..."
	}
	return newCommand(TypeFailJob, 1, FailJobBody{Job: job, Worker: worker, Reason: reason})
}

func applyFailJob(s *State, c Command) (any, error) {
	var b FailJobBody
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
	if len(b.Reason) > MaxFailureBytes {
		return nil, fmt.Errorf("%w: failure reason of %d bytes, limit %d", ErrInvalidCommand, len(b.Reason), MaxFailureBytes)
	}
	if j.Failure != nil {
		return false, nil
	}
	j.Failure = &JobFailure{Worker: b.Worker, Reason: b.Reason, At: c.At}
	return true, nil
}
