package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// consumerBody is the body of TypeAttachConsumer and TypeDetachConsumer.
type consumerBody struct {
	Job      string `cbor:"1,keyasint"`
	Consumer string `cbor:"2,keyasint"`
	// Metrics (AttachConsumer v2) is the consumer's latest metric, kept
	// in Job.ConsumerMetrics; nil keeps the one it had.
	Metrics *autoscale.Metric `cbor:"3,keyasint,omitempty"`
}

// NewAttachConsumer attaches consumer to job, or renews its lease: the
// lease expires at the command's At + the job's ConsumerTTL. ErrUnknownJob
// if there is no such job; ErrLimit if NumConsumers are already attached;
// ErrDetached if the consumer detached (see Job.Detached). Result: int64,
// the lease expiry (Unix nanoseconds).
func NewAttachConsumer(job, consumer string) Command {
	return newCommand(TypeAttachConsumer, 1, consumerBody{Job: job, Consumer: consumer})
}

// NewHeartbeat is NewAttachConsumer with the consumer's latest metric
// (version 2): the job keeps it in ConsumerMetrics. A nil m is version 1.
func NewHeartbeat(job, consumer string, m *autoscale.Metric) Command {
	if m == nil {
		return NewAttachConsumer(job, consumer)
	}
	mc := *m
	return newCommand(TypeAttachConsumer, 2, consumerBody{Job: job, Consumer: consumer, Metrics: &mc})
}

func applyAttachConsumer(s *State, c Command) (any, error) {
	var b consumerBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if j.Group {
		return nil, fmt.Errorf("%w: %q is a share group, not a job: attach to one of its jobs", ErrInvalidCommand, b.Job)
	}
	if _, ok := j.Detached[b.Consumer]; ok {
		return nil, fmt.Errorf("%w: consumer %q left job %q; a new consumer needs a new id", ErrDetached, b.Consumer, b.Job)
	}
	if _, ok := j.Consumers[b.Consumer]; !ok {
		limit := j.Options.NumConsumers()
		if limit == 0 {
			limit = maxJobConsumers
		}
		if len(j.Consumers) >= limit {
			return nil, fmt.Errorf("%w: job %q already has %d consumers (num_consumers %d); a consumer that crashed holds its place until its lease expires (consumer_ttl %s)",
				ErrLimit, b.Job, len(j.Consumers), j.Options.NumConsumers(), j.Options.ConsumerTTL())
		}
	}
	if b.Metrics != nil {
		if c.Version < 2 {
			return nil, fmt.Errorf("%w: AttachConsumer v1 carries no metric", ErrInvalidCommand)
		}
		if err := b.Metrics.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	exp := addSat(c.At, j.Options.ConsumerTTL())
	j.Consumers[b.Consumer] = exp
	if b.Metrics != nil {
		if j.ConsumerMetrics == nil {
			j.ConsumerMetrics = map[string]autoscale.Metric{}
		}
		j.ConsumerMetrics[b.Consumer] = *b.Metrics
		j.stepScale(b.Consumer, *b.Metrics)
		s.rememberScale(j)
	}
	j.NoConsumersSince = 0
	return exp, nil
}
