package worker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// task runs one job on this worker: its producer makes the job's batches
// and serves them to the job's consumer streams. Words used in this file
// and the producers, one meaning each: a production ENDS (end of data, or
// failure) and then the task lingers until its job is gone; a split is
// FINISHED once the pipeline has read it completely (leases.go reports
// it); a lease loop is DONE once the leader said it hands out no more.
type task struct {
	w      *Worker
	job    api.JobInfo
	spec   *pipeline.Spec
	splits pipeline.SplitList

	ctx    context.Context
	cancel context.CancelFunc
	prod   producer

	// poll paces the checks that the job still exists (offer.go); only
	// the task's goroutine reads it.
	poll *time.Ticker
	// checking: a check that the job exists runs (offer.go's checkJob).
	checking atomic.Bool

	ended chan struct{} // closed when production ends

	// dismissed: the job gave this worker back (dismiss.go); retired: the
	// dismissed task has drained, and a new stream starts a new task.
	dismissed, retired atomic.Bool

	produced      atomic.Int64 // batches queued for consumers
	producedBytes atomic.Int64 // their encoded size (plain and shared tasks)
	streams       atomic.Int64 // consumer streams being served

	// Time the production waited (ns): for a lease with no split queued
	// (leases.go), and for room in its full queue, its consumers slower
	// than its pipeline (offer.go).
	leaseWait, offerWait atomic.Int64

	// stats are the per-op statistics of the pipelines the task ran
	// (opstats.go); a sharing task reads its production's instead.
	stats opStatsLog
}

// opStatsLog is where the statistics of the task's pipelines are kept.
func (t *task) opStatsLog() *opStatsLog {
	if r, ok := t.prod.(*sharedReader); ok {
		return &r.prod.stats
	}
	return &t.stats
}

// producer is one way of making a task's batches: plain (the task runs its
// own pipeline, produce_plain.go), shared (it reads a production shared
// with other jobs, produce_shared.go) or rounds (coordinated reads: it
// serves round windows, produce_rounds.go). The job's options choose one
// when the task starts.
type producer interface {
	// produce makes the task's batches and offers them to its consumers
	// (offer.go) until the data ends (nil), production fails, or the task
	// is cancelled. It runs on the task's goroutine.
	produce() error
	// end is called once produce has returned, with its error: consumers
	// get the batches already queued, then the end (or the error).
	end(err error)
	// serve answers one consumer stream until it is served, the
	// consumer goes away, or ctx (the node's) ends.
	serve(ctx context.Context, s *batch.Sender, req batch.OpenRequest)
	// queued is how many batches wait for a consumer.
	queued() int
}

// newTaskLocked creates job's task and its producer; run starts it. w.mu
// is held (a sharing task joins its production under it).
func (w *Worker) newTaskLocked(job api.JobInfo, spec *pipeline.Spec, all pipeline.SplitList) (*task, error) {
	if cut := job.Options.OffloadBoundary; cut > 0 {
		// A partial offload: this node runs the prefix and ships single
		// elements; the consumers run the rest (pipeline.OpenSuffix).
		if err := spec.CheckCut(cut); err != nil {
			return nil, err
		}
		spec = spec.Prefix(cut)
	}
	t := &task{w: w, job: job, spec: spec, splits: all, ended: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(w.ctx)
	var err error
	switch {
	case job.Options.Coordinated:
		t.prod, err = newRoundProducer(t)
	case job.Options.Share:
		t.prod, err = newSharedReader(t)
	default:
		t.prod = newPlainProducer(t)
	}
	if err != nil {
		t.cancel()
		return nil, err
	}
	return t, nil
}

// compression is the job's compression (api.JobOptions.Compression); none
// when this node does not know the name (a newer node's).
func (t *task) compression() batch.Compression {
	c, err := batch.ParseCompression(t.job.Options.Compression)
	if err != nil {
		return batch.CompressNone
	}
	return c
}

// run is the task's goroutine: production, then lingering until the job is
// gone.
func (t *task) run() {
	defer t.w.wg.Done()
	defer t.w.remove(t)
	t.poll = time.NewTicker(t.w.cfg.JobPollInterval)
	defer t.poll.Stop()
	err := t.prod.produce()
	t.prod.end(err)
	close(t.ended)
	if err != nil && t.ctx.Err() == nil {
		t.w.log.Warn("task failed", "job", t.job.Name, "err", err)
	}
	if err == nil && t.dismissed.Load() {
		t.retire() // not the end of the task's data: the job dismissed it
		return
	}
	if t.ctx.Err() == nil && (err != nil || !t.w.draining()) {
		// The data ended, or production failed: not a cancellation
		// (node closing, job gone) or a drain, which is no end of the
		// task's data.
		t.w.reportTaskEnd(t.job, err)
	}
	// Stay around, ended, so consumers that connect later get the end of
	// data at once, until the job is garbage-collected.
	t.waitForJobGone()
}

// hasEnded reports whether production has ended.
func (t *task) hasEnded() bool {
	select {
	case <-t.ended:
		return true
	default:
		return false
	}
}

// reportTaskEnd records that the task's data ended (err nil) or that it
// failed: the leader ends or fails the job once its tasks say so.
func (w *Worker) reportTaskEnd(job api.JobInfo, taskErr error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.requestTimeout)
	defer cancel()
	req := api.EndTaskRequest{Job: job.Name, Worker: w.name, JobID: job.ID}
	if taskErr != nil {
		req.Failure = taskErr.Error()
	}
	if err := w.host.EndTask(ctx, req); err != nil && ctx.Err() == nil {
		w.log.Warn("record the end of a task", "job", job.Name, "failed", taskErr != nil, "err", err)
	}
}
