package worker

import (
	"context"
	"errors"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/transport"
)

// Draining: what a graceful shutdown (Node.Close: Ctrl-C, SIGTERM) does
// before the node leaves, bounded by Config.DrainTimeout, so that a rolling
// restart loses nothing and reads nothing twice:
//
//  1. The worker takes no new task, and every DYNAMIC production (plain
//     or shared) stops leasing: it hands the splits it leased and has not
//     started back to the job's other workers (leaseProvider.handBack),
//     which lease them before any new split. The leader refuses that when
//     no other worker would take them (this is the job's last live
//     worker; or, at-most-once, every split is handed out, so the others
//     may have stopped asking): the production then reads them itself.
//  2. The split in progress is read to its end, the batches made of it
//     are queued, and the production ends; its consumers read what is
//     queued, then its end of data, and close their streams.
//  3. Exactly-once: the node waits until the consumers' receipts settle
//     every split it produced, so that nothing of it is read again.
//  4. It records the drain in the job (fsm.NewDrainTask): its
//     next process rejoins the job rather than being out of it for good,
//     so a rolling restart keeps every job's workers.
//  5. The node leaves (gossip leave, leadership transfer), as before.
//
// A task counts as drained when step 3 is over, or when its job has no
// consumer attached (nobody would read what it holds). Coordinated tasks
// do not drain: their rounds are fixed per worker, and the ranks read a
// drained worker's part as a dead one's (fillers, exactly-once re-reads).
// OFF and STATIC tasks have nothing to hand back and are not waited for.
// What DrainTimeout cuts short is treated as a crash: at-most-once loses
// the splits still held, exactly-once reads them again elsewhere.

// drainPoll is how often a draining node checks whether its tasks are
// done.
const drainPoll = 20 * time.Millisecond

// StartDrain has the worker's DYNAMIC productions stop leasing and hand
// back what they hold; idempotent.
func (w *Worker) StartDrain() { w.drainOnce.Do(func() { close(w.drainCh) }) }

// draining reports whether the worker drains.
func (w *Worker) draining() bool {
	select {
	case <-w.drainCh:
		return true
	default:
		return false
	}
}

// Drain starts the drain and waits until every task has drained, or ctx
// ends. It reports whether everything drained.
func (w *Worker) Drain(ctx context.Context) bool {
	w.StartDrain()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	recorded := map[*task]bool{}
	views := map[string]drainView{}
	for {
		var pending []string
		for _, t := range w.taskList() {
			done, record := t.drained(ctx, views)
			switch {
			case !done:
				pending = append(pending, t.job.Name)
			case record && !recorded[t]:
				recorded[t] = true
				w.recordDrained(ctx, t)
			}
		}
		if len(pending) == 0 {
			return true
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			w.log.Warn("drain cut short by the drain timeout: what these tasks hold is lost (at-most-once) or read again elsewhere (exactly-once)", "jobs", pending)
			return false
		}
	}
}

// drainView is what a draining task needs to know of its job, as the
// leader last said (or this node's replica, if it has one).
type drainView struct {
	at        time.Time
	ok        bool // the job exists
	id        uint64
	consumers int
	held      int // splits this worker holds
}

// drainViewEvery bounds how often a draining task asks the leader about
// its job, on a node without a replica of the state; drainViewFresh, once
// the task waits only for what the leader knows (receipts).
const (
	drainViewEvery = 200 * time.Millisecond
	drainViewFresh = 50 * time.Millisecond
)

// jobDrainView returns job's drainView, from the node's replica if it
// has the job, else from the leader at most every drainViewEvery
// (drainViewFresh when fresh).
func (w *Worker) jobDrainView(ctx context.Context, job string, cache map[string]drainView, fresh bool) drainView {
	if v, ok := w.host.LocalJob(job); ok {
		return drainView{ok: true, id: v.ID, consumers: v.Consumers, held: v.Held}
	}
	maxAge := drainViewEvery
	if fresh {
		maxAge = drainViewFresh
	}
	if c, ok := cache[job]; ok && time.Since(c.at) < maxAge {
		return c
	}
	rctx, cancel := context.WithTimeout(ctx, w.requestTimeout)
	resp, err := w.host.JobGet(rctx, job)
	cancel()
	dv := drainView{at: time.Now(), ok: err == nil}
	if err != nil && !errors.Is(err, transport.ErrNotFound) {
		dv.ok, dv.consumers = true, 1 // unknown: keep waiting, bounded by the drain timeout
	}
	if err == nil {
		dv.id, dv.consumers = resp.Job.ID, len(resp.Job.Consumers)
		for _, wi := range resp.Job.Workers {
			if wi.Name == w.name {
				dv.held = wi.Held
			}
		}
	}
	cache[job] = dv
	return dv
}

// recordDrained tells the job that this process drained its task: it
// holds nothing, and the node's next process rejoins the job
// (fsm.NewDrainTask). Without it the node's departure expires it from
// the job for good, which loses nothing either, but takes its CPUs from
// the job.
func (w *Worker) recordDrained(ctx context.Context, t *task) {
	rctx, cancel := context.WithTimeout(ctx, w.requestTimeout)
	defer cancel()
	err := w.host.Drained(rctx, api.DrainedRequest{Job: t.job.Name, JobID: t.job.ID, Worker: w.name, Incarnation: w.incarnation})
	if err != nil {
		w.log.Info("drained task not recorded: this node's next process will not rejoin the job", "job", t.job.Name, "reason", err)
		return
	}
	w.log.Info("task drained", "job", t.job.Name)
}

func (w *Worker) taskList() []*task {
	w.mu.Lock()
	defer w.mu.Unlock()
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	return tasks
}

// drained reports whether t has nothing more a consumer would read from
// this node (see the comment at the top of this file), and whether it
// drained through its end (record: fsm.NewDrainTask applies).
func (t *task) drained(ctx context.Context, views map[string]drainView) (done, record bool) {
	o := t.job.Options
	if o.Sharding != jobspec.Dynamic || o.Coordinated {
		return true, false
	}
	local := t.hasEnded() && t.prod.queued() == 0 && t.streams.Load() == 0
	v := t.w.jobDrainView(ctx, t.job.Name, views, local)
	if !v.ok || v.consumers == 0 || v.id != t.job.ID {
		return true, false // the job is gone, replaced, or nobody reads it
	}
	// Exactly-once: the splits it produced settle once the consumers'
	// receipts cover them.
	if !local || v.held > 0 {
		return false, false
	}
	return true, !o.Share
}
