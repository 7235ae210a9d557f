package worker

import (
	"context"
	"errors"
	"time"

	"github.com/feedmesh/feedmesh/api"
)

// A production runs one pipeline per phase. A phase ends when the leases
// are done (exactly-once: AwaitMore then waits for a dead worker's splits
// to read again), or when the next split must run in another pipeline: a
// cut set while the job runs, or a census (TakeRecut). The caller opens
// the next phase's pipeline with NextCut and NextCensus.

// learnCut reads the job's cut (Config.JobCut) and gives it to every
// split queued: none is started, and each element says how it was made,
// so they may run cut whatever their lease said.
func (p *Leaser) learnCut() {
	c := 0
	if p.cfg.JobCut != nil {
		c = p.cfg.JobCut()
	}
	for _, ls := range p.queue {
		c = max(c, ls.cut)
	}
	if c == 0 || c == p.cutSeen {
		return
	}
	p.cutSeen = c
	for i := range p.queue {
		p.queue[i].cut = c
	}
}

// NextCut is the cut the next pipeline opens with: the first queued
// split's, or the running one's when none is queued.
func (p *Leaser) NextCut() int {
	p.learnCut()
	if len(p.queue) > 0 {
		return p.queue[0].cut
	}
	return max(p.cut, p.cutSeen)
}

// NextCensus reports whether the next pipeline is a census: the first
// queued split's kind, or the running one's when none is queued.
func (p *Leaser) NextCensus() bool {
	if len(p.queue) > 0 {
		return p.queue[0].census
	}
	return p.census
}

// StartPhase records how the next pipeline runs: with cut, as a census
// or not.
func (p *Leaser) StartPhase(cut int, census bool) { p.cut, p.census = cut, census }

// Census reports whether the running pipeline is a census.
func (p *Leaser) Census() bool { return p.census }

// QueuedCensus counts the census splits queued.
func (p *Leaser) QueuedCensus() int {
	n := 0
	for _, ls := range p.queue {
		if ls.census {
			n++
		}
	}
	return n
}

// TakeRecut reports (once) whether the last phase ended for a split of
// another cut, or of the other kind (census).
func (p *Leaser) TakeRecut() bool {
	r := p.recut
	p.recut = false
	return r
}

// AwaitMore (exactly-once) is called when a phase has ended: every split
// this worker leased is produced, and the leases are done. It asks again
// every Config.Poll until a lease brings splits (a dead worker's, to read
// again: true, and Next hands them out) or says every split of the job is
// produced (false: the production ends). The caller runs a new pipeline
// for each phase, so that the last one's partial batches are flushed, not
// held back waiting.
func (p *Leaser) AwaitMore(ctx context.Context) (bool, error) {
	p.prod.flush()
	p.prod.wg.Wait() // the last reports go first
	if p.policy.inflight {
		if err := p.await(ctx); err != nil {
			return false, err
		}
	}
	if len(p.queue) > 0 {
		return true, nil
	}
	if p.over {
		return false, nil
	}
	t := time.NewTicker(p.cfg.Poll)
	defer t.Stop()
	var stop <-chan struct{}
	if p.cfg.Stop != nil {
		stop = p.cfg.Stop.Done()
	}
	// A request whose call failed goes out again unchanged, with its id:
	// it may have committed (only its answer lost), and the leader then
	// answers with the same lease. A new id would leave those splits
	// leased to this worker, which would never read them: the job would
	// never end (every worker polling for splits nobody reads).
	var retry *api.LeaseRequest
	for {
		if p.drained || p.draining() || p.stopping() {
			return false, nil // the others read what is orphaned from now on
		}
		select {
		case <-t.C:
		case <-p.cfg.Drain:
			continue
		case <-stop:
			continue
		case <-ctx.Done():
			return false, ctx.Err()
		}
		if retry == nil {
			p.reqID++
			r := p.leaseRequest(p.policy.size())
			retry = &r
		}
		resp, err := p.ctl.Lease(ctx, *retry)
		if err == nil {
			retry = nil
		}
		switch {
		case errors.Is(err, api.ErrNotAssigned):
			p.expire()
			return false, nil
		case p.dismissedBy(ctx, err):
			return false, nil
		case err != nil && Retriable(err):
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			p.log.Warn("exactly-once: asking for splits to read again; will retry", "err", err)
			continue
		case err != nil:
			return false, err
		case resp.AllProduced && len(resp.Splits) == 0:
			p.over = true
			return false, nil
		case len(resp.Splits) > 0:
			p.enqueue(resp)
			p.policy.done = resp.Done
			return true, nil
		}
	}
}
