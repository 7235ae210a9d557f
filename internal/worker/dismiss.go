package worker

import (
	"time"
)

// A task its job dismissed (autoscaling gave the worker back to the mesh:
// internal/fsm/cmd_allocatejob.go) drains as a graceful shutdown drains it
// (drain.go), but alone, while the node goes on serving its other jobs:
//
//  1. The lease that is refused (api.ErrDismissed) tells the task; the
//     lease loop hands its queued splits back (Leaser.dismissedBy),
//     reads the split in progress to its end, and the production ends.
//  2. Its consumers read what is queued, then a paused end (not the end
//     of data: the job goes on elsewhere, and the worker may be given the
//     job again later, assigned afresh).
//  3. Exactly-once: the task waits until the consumers' receipts settle
//     what it produced, then records the drain (fsm.NewDrainTask),
//     which frees the node for the allocation; the task is retired and
//     gone, so that a stream opened after the job takes the worker back
//     starts a new one.
//
// No end of the task's data is reported (EndTask): its data did not end.

// markDismissed marks the task dismissed by its job; its production drains.
func (t *task) markDismissed() { t.dismissed.Store(true) }

// retire waits, after a dismissed task's production has ended, until it
// has drained (drained: its queue read, its streams closed, its splits
// settled), records the drain, and returns: the task's goroutine then
// ends and the task leaves the worker. It polls every drainPoll, for as
// long as the task lives (the node's Close cancels it).
func (t *task) retire() {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	views := map[string]drainView{}
	for {
		done, record := t.drained(t.ctx, views)
		if done {
			t.retired.Store(true) // a new stream starts a new task from now on
			if record {
				t.w.recordDrained(t.ctx, t)
			}
			t.w.log.Info("dismissed task drained; the node is free for other jobs", "job", t.job.Name)
			t.cancel()
			return
		}
		select {
		case <-tick.C:
		case <-t.ctx.Done():
			return
		}
	}
}
