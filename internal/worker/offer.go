package worker

import (
	"context"
	"errors"
	"time"

	"github.com/feedmesh/feedmesh/transport"
)

// What a worker does when its consumers disappear.
//
// A consumer that goes away mid-stream loses what its stream had taken
// from the task and not yet written (at most SendCoalesce batches; for a
// coordinated consumer, the batch of its round): at-most-once, as tf.data
// service. The task itself keeps producing until its queue is full (the
// back-pressure of TaskBuffer, or RoundsAhead windows), then waits in offer.
// When no consumer is left, the leader garbage-collects the job; the task
// notices it in offer, which checks every JobPollInterval while it waits
// (in the background: checkJob), or, once production has ended, in
// waitForJobGone, and stops. A job of the same name created since (a new
// ID) counts as gone: this task, with the old spec and options, must not
// serve it. Both places use jobGone; there is no other.

// offer hands v to the task's consumers through ch, blocking while ch is
// full: that is the task's back-pressure. While it waits it checks, every
// JobPollInterval, that the job still exists, and cancels the task when
// it does not (checkJob, without blocking). It returns the task's context
// error once cancelled. Every producer queues through it.
func offer[T any](t *task, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	default:
	}
	start := time.Now()
	defer func() { t.offerWait.Add(int64(time.Since(start))) }()
	for {
		select {
		case ch <- v:
			return nil
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-t.poll.C:
			t.checkJob()
		}
	}
}

// checkJob checks that the task's job still exists, and cancels the task
// when it does not, in the background: the answer comes from the leader,
// and in a leader's failover it takes seconds with the default preset; a
// producer waiting in offer (its queue full) must be free to queue the
// moment a consumer takes a batch, or its consumers starve meanwhile. One
// check at a time.
func (t *task) checkJob() {
	if !t.checking.CompareAndSwap(false, true) {
		return
	}
	t.w.wg.Add(1)
	go func() {
		defer t.w.wg.Done()
		defer t.checking.Store(false)
		if t.jobGone() {
			t.cancel()
		}
	}()
}

// jobGone asks the control plane whether the task's job is gone.
func (t *task) jobGone() bool {
	ctx, cancel := context.WithTimeout(t.ctx, t.w.requestTimeout)
	defer cancel()
	resp, err := t.w.host.JobGet(ctx, t.job.Name)
	// A job of the same name created since (a new ID) is another job: this
	// task, with the old spec and options, must not serve it.
	return errors.Is(err, transport.ErrNotFound) || (err == nil && resp.Job.ID != t.job.ID)
}

// waitForJobGone returns when the job is gone or the task is cancelled.
func (t *task) waitForJobGone() {
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.poll.C:
			if t.jobGone() {
				t.w.log.Info("task stopped: job garbage-collected", "job", t.job.Name)
				return
			}
		}
	}
}
