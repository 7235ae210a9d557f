package worker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/feedmesh/feedmesh/api"
)

// dismissedBy handles a lease refused because the job dismissed this
// worker: it drains (handBack) and reports true.
func (p *Leaser) dismissedBy(ctx context.Context, err error) bool {
	if !errors.Is(err, api.ErrDismissed) {
		return false
	}
	if p.policy.inflight {
		p.policy.answered(time.Now(), true)
	}
	p.policy.done = true
	if !p.drained {
		p.log.Info("dismissed from the job by autoscaling: handing back the splits not started", "queued", len(p.queue))
		if p.cfg.OnDismiss != nil {
			p.cfg.OnDismiss()
		}
	}
	p.handBack(ctx)
	return true
}

// draining reports whether the node has started to drain.
func (p *Leaser) draining() bool {
	select {
	case <-p.cfg.Drain:
		return true
	default:
		return false
	}
}

// handBack (once the node drains, or the job dismissed it) stops leasing
// and hands the splits queued, and those of a lease in flight, back to
// the job's other workers (splits/handback.go). What the leader refuses
// (this is the job's last live worker; at-most-once, every split is
// handed out) stays queued, and the pipeline reads it before the task
// ends. What may or may not have been handed back (the request failed on
// the way) is not read: reading a split another worker leased could
// deliver its elements twice.
func (p *Leaser) handBack(ctx context.Context) {
	if p.drained {
		return
	}
	p.drained = true
	p.policy.done = true // ask for nothing more
	if p.policy.inflight {
		select {
		case r := <-p.answer:
			p.policy.answered(time.Now(), true)
			if r.err == nil {
				p.enqueue(r.resp)
			}
		case <-ctx.Done():
			return
		}
	}
	byEpoch := map[int64][]int64{}
	for _, ls := range p.queue {
		byEpoch[ls.epoch] = append(byEpoch[ls.epoch], ls.id)
	}
	back := map[[2]int64]bool{}
	for _, epoch := range slices.Sorted(maps.Keys(byEpoch)) {
		ids := byEpoch[epoch]
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		err := p.ctl.HandBack(rctx, api.HandBackRequest{Job: p.cfg.Job, Worker: p.cfg.Worker, Epoch: epoch, Splits: ids, JobID: p.cfg.JobID})
		cancel()
		if errors.Is(err, api.ErrHandBackRefused) {
			// Refused, nothing changed: they are this worker's to read.
			p.log.Info("draining: splits not handed back; reading them before leaving", "epoch", epoch, "splits", len(ids), "reason", err)
			continue
		}
		if err != nil {
			// Unknown outcome (the hand-back may have committed, and
			// another worker may read them): never read them here. They
			// stay this worker's if it did not commit: lost at-most-once,
			// read again exactly-once, once the node has left.
			p.log.Warn("draining: handing splits back failed; not reading them", "epoch", epoch, "splits", len(ids), "err", err)
		} else {
			p.log.Info("draining: splits handed back to the other workers", "epoch", epoch, "splits", len(ids))
		}
		for _, id := range ids {
			back[[2]int64{epoch, id}] = true
		}
	}
	p.queue = slices.DeleteFunc(p.queue, func(ls leasedSplit) bool { return back[[2]int64{ls.epoch, ls.id}] })
}
