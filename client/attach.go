package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
)

// Attaching a consumer to a job: Attach (by name, without the spec), and
// the heartbeat that attaches a new consumer and answers its capability.

// Attach joins an existing job by name, without its spec (a trainer that
// did not create the job). An unknown job is an error that wraps
// transport.ErrNotFound.
func (c *Client) Attach(ctx context.Context, job string) (*Iterator, error) {
	consumer, info, err := c.attach(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := api.CheckJobInfo(info); err != nil {
		return nil, fmt.Errorf("attach to job %q: %w", job, err)
	}
	if info.State == api.JobFinished {
		c.leave(job, consumer)
		return nil, &JobFinishedError{Job: job, ID: info.ID, CreatedAt: info.CreatedAt, Consumers: len(info.Consumers) - 1, GCAfter: info.Options.GCAfter}
	}
	if info.Options.Coordinated {
		// A coordinated consumer needs its index: Distribute with
		// ConsumerIndex. Leave the lease to expire on its own.
		return nil, fmt.Errorf("attach to job %q: it uses coordinated reads; join it with Distribute and JobOptions.ConsumerIndex", job)
	}
	if cut := info.Options.OffloadBoundary; cut > 0 {
		// The nodes ship single elements and each consumer runs the ops
		// after the cut (a job offload auto cut while it ran, say): the
		// spec comes from the cluster.
		off, err := c.attachCut(ctx, job, cut)
		if err != nil {
			return nil, fmt.Errorf("attach to job %q: it cuts its pipeline after %d ops (offload_boundary) and this client runs the rest: %w", job, cut, err)
		}
		return newIterator(c, info, consumer, false, 0, nil, off, nil), nil
	}
	// Without the spec, assume batches (the common case for training).
	return newIterator(c, info, consumer, true, 0, nil, nil, nil), nil
}

// attachCut is the offload of a consumer attached to a cut job: the ops
// after the cut, of the job's spec as the cluster holds it.
func (c *Client) attachCut(ctx context.Context, job string, cut int) (*offloadRun, error) {
	var resp api.JobGetResponse
	if err := c.call(ctx, api.MethodJobGet, api.JobRequest{Job: job}, &resp); err != nil {
		return nil, fmt.Errorf("its spec: %w", err)
	}
	spec, err := pipeline.DecodeCanonical(resp.Spec)
	if err != nil {
		return nil, fmt.Errorf("its spec: %w", err)
	}
	if err := suffixRunsHere(spec, cut); err != nil {
		return nil, fmt.Errorf("the ops after the cut cannot run here (an op registered only in the node binary?): %w", err)
	}
	r := &offloadRun{requested: jobspec.OffloadRemote, mode: jobspec.OffloadRemote, cut: cut,
		reason: fmt.Sprintf("attached to a job cut after %d ops: the nodes run the source and ops [0, %d), this client ops [%d, %d)", cut, cut, cut, len(spec.Ops))}
	return r.withSpec(spec, 0), nil
}

// leave detaches consumer from job at once, best effort (a consumer that
// attached to a job it will not read).
func (c *Client) leave(job, consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
	defer cancel()
	if err := c.call(ctx, api.MethodDetach, api.JobRequest{Job: job, Consumer: consumer}, nil); err != nil {
		c.opts.Logger.Debug("leaving a finished job", "job", job, "err", err)
	}
}

// attach attaches a new consumer to job by its heartbeat, whose answer
// carries the consumer's capability. A heartbeat retried after one that
// attached the consumer but whose answer was lost (a failover) renews it
// instead, and answers none: the consumer is left (to expire, or
// detached) and another attached, once; a second answer without one is
// a cluster of an older release, which checks none.
func (c *Client) attach(ctx context.Context, job string) (string, api.JobInfo, error) {
	for attempt := 0; ; attempt++ {
		consumer, err := newConsumerID()
		if err != nil {
			return "", api.JobInfo{}, err
		}
		var info api.JobInfo
		if err := c.call(ctx, api.MethodHeartbeat, api.JobRequest{Job: job, Consumer: consumer}, &info); err != nil {
			return "", api.JobInfo{}, fmt.Errorf("attach to job %q: %w", job, err)
		}
		if len(info.Capability) > 0 || attempt > 0 {
			return consumer, info, nil
		}
		c.leave(job, consumer)
	}
}

func newConsumerID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
