package worker

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
)

// producedReports (exactly-once) reports the splits whose every element
// the pipeline has emitted, in the background. One report is in flight at
// a time, at most one starts every Config.ProduceInterval, and each
// carries every split completed since the one before (one request per
// epoch), so a fast pipeline of small splits costs a few Raft commands a
// second, not one per split nor one per commit's round trip. flush sends
// what is pending without waiting for the interval (the end of a phase).
// Unlike finished splits, produced ones are part of delivery (the job
// cannot end without them), so a failed report is retried until it lands,
// is refused for good (a retry of one that landed is refused as not
// leased), or the production ends.
type producedReports struct {
	p       *Leaser
	mu      sync.Mutex
	pending []pipeline.CompletedSplit
	sending bool          // the reporting goroutine runs
	urgent  bool          // flushed: report without waiting, until nothing is pending
	flushed chan struct{} // capacity 1: wakes the reporting goroutine (flush)
	wg      sync.WaitGroup
}

func (r *producedReports) init(p *Leaser) {
	r.p = p
	r.flushed = make(chan struct{}, 1)
}

// Produced queues splits emitted completely for the next report.
func (p *Leaser) Produced(cs []pipeline.CompletedSplit) { p.prod.add(cs) }

// FlushProduced reports what is pending now and returns once it has
// landed (or the production ended): a local worker that retires must have
// its produced splits in before the cluster expires it.
func (p *Leaser) FlushProduced() {
	p.prod.flush()
	p.prod.wg.Wait()
}

func (r *producedReports) add(cs []pipeline.CompletedSplit) {
	if len(cs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, cs...)
	if r.sending {
		return
	}
	r.sending = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.run()
	}()
}

func (r *producedReports) run() {
	ctx := r.p.ctx
	for {
		r.mu.Lock()
		batch := r.pending
		r.pending = nil
		if len(batch) == 0 || ctx.Err() != nil {
			r.sending, r.urgent = false, false
			select {
			case <-r.flushed: // a flush this goroutine has served
			default:
			}
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		start := time.Now()
		r.send(batch)
		r.mu.Lock()
		urgent := r.urgent
		r.mu.Unlock()
		if wait := r.p.cfg.ProduceInterval - time.Since(start); wait > 0 && !urgent {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-r.flushed:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}

// flush has the produced splits pending reported now, not at the next
// interval, and the reporting goroutine end as soon as nothing is pending.
func (r *producedReports) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.sending {
		return
	}
	r.urgent = true
	select {
	case r.flushed <- struct{}{}:
	default:
	}
}

// maxProduceIntervals keeps one report well under the default
// MaxCommandBytes of a Raft command (1 MiB) at up to 18 bytes an
// interval. A report over it, or over jobspec.MaxReceipts splits, goes
// out as several.
const maxProduceIntervals = 1 << 15

// send sends one report of produced splits, one request per epoch (more
// past the bounds), each until it lands or is refused for good.
func (r *producedReports) send(cs []pipeline.CompletedSplit) {
	byEpoch := map[int64][]ranges.SplitEmitted{}
	for _, c := range cs {
		byEpoch[c.Epoch] = append(byEpoch[c.Epoch], ranges.SplitEmitted{Split: c.Split, Emitted: c.Emitted})
	}
	for _, epoch := range slices.Sorted(maps.Keys(byEpoch)) {
		for done := byEpoch[epoch]; len(done) > 0; {
			n, intervals := 0, 0
			for n < len(done) && n < jobspec.MaxReceipts && (n == 0 || intervals+done[n].Emitted.Intervals() <= maxProduceIntervals) {
				intervals += done[n].Emitted.Intervals()
				n++
			}
			req := api.ProduceRequest{Job: r.p.cfg.Job, Worker: r.p.cfg.Worker, Epoch: epoch, Splits: done[:n], JobID: r.p.cfg.JobID}
			if !r.sendOnce(r.p.ctx, req) {
				return
			}
			done = done[n:]
		}
	}
}

// sendOnce sends one request until it lands or is refused for good; false
// if the production ended first.
func (r *producedReports) sendOnce(ctx context.Context, req api.ProduceRequest) bool {
	log := r.p.log
	for attempt := 1; ; attempt++ {
		err := r.p.ctl.Produce(ctx, req)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !Retriable(err) {
			if attempt == 1 {
				log.Warn("exactly-once: produced splits refused (worker expired?): they will be read again elsewhere", "splits", len(req.Splits), "err", err)
			}
			return true
		}
		log.Warn("exactly-once: report produced splits; will retry", "splits", len(req.Splits), "attempt", attempt, "err", err)
		select {
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		case <-ctx.Done():
			return false
		}
	}
}
