package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
)

// leaseProvider is a DYNAMIC production's lease loop: it feeds the
// pipeline with splits leased through Raft, many per lease, and reports the
// splits the pipeline has read completely (finished) along with the next
// request. When to ask and for how many is leasePolicy's decision; this
// type does the I/O: it asks in the background while the pipeline still
// reads the current lease, so a Raft round trip does not stall it.
//
// Every DYNAMIC production uses it: a plain DYNAMIC task (produce_plain.go),
// a shared production under its share group (sharedprod.go) and a
// coordinated task (produce_rounds.go).
type leaseProvider struct {
	ctx    context.Context
	n      *Node
	job    string // the lease identity: the job, or its share group
	splits pipeline.SplitList
	policy leasePolicy
	// exact: the job is exactly-once (splits/exactly.go): the pipeline
	// reports what it emitted (produced), not what it read (finished), and
	// leases may carry exclusions. A phase ends when the leases are done;
	// awaitMore then waits for a dead worker's splits, or the job's end.
	exact bool

	// drain, closed when the node starts a graceful shutdown (nil: this
	// production does not drain, a coordinated one): the provider asks
	// for nothing more, hands the splits it has not started back to the
	// others, and ends once the split in progress is read (drained).
	drain   <-chan struct{}
	drained bool
	// onRelease, if set, is called when a lease is refused because the
	// job released this worker (api.ErrReleased, mesh/release.go): the
	// provider then drains as above.
	onRelease func()

	queue   []leasedSplit
	current leasedSplit
	reading bool              // current was handed to the pipeline, not yet finished
	reqID   uint64            // of the last lease asked for
	lastReq api.LeaseRequest  // the last lease asked for, sent again after a failure whose outcome is unknown
	jobID   uint64            // the ID of the job the task runs (0: unchecked; a share group's)
	held    func() ranges.Set // the splits this worker's autocache holds for the job (nil: none)

	// cut is the offload boundary the running pipeline was opened with.
	// A leased split with another (the job was cut while it ran,
	// OffloadRequest.Cut) ends the pipeline's phase (recut): the task
	// opens one with the split's cut (nextCut) and reads on.
	cut   int
	recut bool
	// census: the running pipeline is a census (splits/census.go): it
	// runs dead workers' splits of an at-most-once job to count what
	// they emit, and delivers nothing. A split of the other kind ends
	// the phase, as a split of another cut does (recut), so that no
	// batch mixes counted and delivered elements.
	census bool
	// cutSeen is the job's cut as last learned (learnCut), and jobCut
	// reads it from the local Raft state (nil: leases only tell).
	cutSeen int
	jobCut  func() int

	finished []leasedSplit // read completely, not yet reported
	waited   *atomic.Int64 // if not nil, adds the ns Next waited with no split queued

	// exactly-once: produced splits waiting for the next report
	pmu     sync.Mutex
	pending []pipeline.CompletedSplit
	sending bool             // the reporting goroutine runs
	urgent  bool             // flushed: report without waiting, until nothing is pending
	flushed chan struct{}    // capacity 1: wakes the reporting goroutine (flush)
	answer  chan leaseResult // capacity 1: the background lease's answer
	wg      sync.WaitGroup
}

type leasedSplit struct {
	id, epoch int64
	exclude   ranges.Set // exactly-once: indices already delivered
	cut       int        // the job's offload boundary when leased (0: none)
	census    bool       // run to count, not to deliver (api.LeaseResponse.Census)
}

type leaseResult struct {
	resp api.LeaseResponse
	err  error
}

// newLeaseProvider leases splits of all under job's name (a job, or a
// share group) for this node, until ctx ends.
func newLeaseProvider(ctx context.Context, n *Node, job string, all pipeline.SplitList, exact bool) *leaseProvider {
	// Request ids start from the clock, not 1: a provider created again for
	// the same (job, worker), as a shared production is after its jobs all
	// left, must not have its first lease taken for a retry of the last.
	return &leaseProvider{ctx: ctx, n: n, job: job, splits: all, exact: exact, answer: make(chan leaseResult, 1), flushed: make(chan struct{}, 1), drain: n.worker.drainCh,
		policy: newLeasePolicy(n.cfg.Worker.LeaseSplits, n.cfg.Worker.LeaseDuration, n.cfg.Worker.failoverAhead(n.cfg.Raft)),
		reqID:  uint64(time.Now().UnixNano())}
}

// Next implements pipeline.SplitProvider. Being asked for the next split
// means the pipeline's source has read the previous one completely.
func (p *leaseProvider) Next(ctx context.Context) (pipeline.ProvidedSplit, error) {
	finished := p.reading
	if finished {
		if !p.exact {
			p.finished = append(p.finished, p.current)
		}
		p.reading = false
	}
	if p.draining() {
		p.handBack(ctx)
	} else {
		p.collect()
		if n := p.policy.next(time.Now(), finished, len(p.queue)); n > 0 {
			p.ask(n)
		}
	}
	if len(p.queue) == 0 && p.waited != nil {
		start := time.Now()
		defer func() { p.waited.Add(int64(time.Since(start))) }()
	}
	for len(p.queue) == 0 {
		if p.drained {
			return pipeline.ProvidedSplit{}, io.EOF
		}
		n, end := p.policy.empty(time.Now())
		if end {
			return pipeline.ProvidedSplit{}, io.EOF
		}
		if n > 0 {
			p.ask(n)
		}
		select {
		case r := <-p.answer:
			if p.releasedBy(ctx, r.err) {
				continue
			}
			if errors.Is(r.err, api.ErrNotAssigned) {
				// Expired while alive (a pause, a gossip blip): the job
				// counted this worker's leases as lost, its consumers
				// dropped it, and it is out of the job for good (the
				// leader never assigns it again), so this worker's part
				// ends here, cleanly, not as a job failure. It leases
				// nothing more; the splits it read before knowing were
				// counted lost and are never leased again, so a consumer
				// still reading its open streams gets no element twice.
				p.policy.answered(time.Now(), true)
				p.n.log.Warn("worker expired from the job while running; ending its part", "job", p.job)
				p.queue = nil
				return pipeline.ProvidedSplit{}, io.EOF
			}
			p.policy.answered(time.Now(), r.err == nil && r.resp.Done)
			if r.err != nil && retriable(r.err) && ctx.Err() == nil {
				// No leader for longer than a request waits (an election
				// on loaded cores, a partition): the job waits for one,
				// it does not fail. The same request goes out again (it
				// may have committed: its id makes the leader answer
				// with the same lease); each waits up to RequestTimeout.
				p.n.log.Warn("lease splits: no answer; asking again", "job", p.job, "err", r.err)
				p.policy.ask(time.Now())
				p.send(p.lastReq)
				continue
			}
			if r.err != nil {
				return pipeline.ProvidedSplit{}, fmt.Errorf("lease splits: %w", r.err)
			}
			p.enqueue(r.resp)
		case <-p.drain:
			p.handBack(ctx)
		case <-ctx.Done():
			return pipeline.ProvidedSplit{}, ctx.Err()
		}
	}
	p.learnCut()
	if p.queue[0].cut != p.cut || p.queue[0].census != p.census {
		p.recut = true
		return pipeline.ProvidedSplit{}, io.EOF
	}
	ls := p.queue[0]
	p.queue = p.queue[1:]
	s, err := splitByID(p.splits, ls.id)
	if err != nil {
		return pipeline.ProvidedSplit{}, err
	}
	p.current, p.reading = ls, true
	return pipeline.ProvidedSplit{Split: s, Epoch: ls.epoch, Exclude: ls.exclude}, nil
}

// learnCut reads the job's cut from this node's Raft state (a cut set
// while the job runs shows there before a lease says so) and gives it to
// every split queued: none is started, and each element says how it was
// made, so they may run cut whatever their lease said.
func (p *leaseProvider) learnCut() {
	c := 0
	if p.jobCut != nil {
		c = p.jobCut()
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

// nextCut is the offload boundary the next pipeline opens with: the
// first queued split's, or the running one's when none is queued.
func (p *leaseProvider) nextCut() int {
	p.learnCut()
	if len(p.queue) > 0 {
		return p.queue[0].cut
	}
	return max(p.cut, p.cutSeen)
}

// nextCensus reports whether the next pipeline is a census: the first
// queued split's kind, or the running one's when none is queued.
func (p *leaseProvider) nextCensus() bool {
	if len(p.queue) > 0 {
		return p.queue[0].census
	}
	return p.census
}

// queuedCensus counts the census splits queued.
func (p *leaseProvider) queuedCensus() int {
	n := 0
	for _, ls := range p.queue {
		if ls.census {
			n++
		}
	}
	return n
}

// takeRecut reports (once) whether the last phase ended for a split of
// another cut, or of the other kind (census).
func (p *leaseProvider) takeRecut() bool {
	r := p.recut
	p.recut = false
	return r
}

// releasedBy handles a lease refused because the job released this
// worker: it drains (handBack) and reports true.
func (p *leaseProvider) releasedBy(ctx context.Context, err error) bool {
	if !errors.Is(err, api.ErrReleased) {
		return false
	}
	if p.policy.inflight {
		p.policy.answered(time.Now(), true)
	}
	p.policy.done = true
	if !p.drained {
		p.n.log.Info("released from the job by autoscaling: handing back the splits not started", "job", p.job, "queued", len(p.queue))
		if p.onRelease != nil {
			p.onRelease()
		}
	}
	p.handBack(ctx)
	return true
}

// draining reports whether the node has started to drain.
func (p *leaseProvider) draining() bool {
	select {
	case <-p.drain:
		return true
	default:
		return false
	}
}

// handBack (once the node drains) stops leasing and hands the splits
// queued, and those of a lease in flight, back to the job's other workers
// (splits/handback.go). What the leader refuses (this is the job's last
// live worker; at-most-once, every split is handed out) stays queued, and
// the pipeline reads it before the task ends. What may or may not have
// been handed back (the request failed on the way) is not read: reading a
// split another worker leased could deliver its elements twice.
func (p *leaseProvider) handBack(ctx context.Context) {
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
		rctx, cancel := context.WithTimeout(ctx, p.n.cfg.RequestTimeout)
		err := p.n.handBack(rctx, api.HandBackRequest{Job: p.job, Worker: p.n.name, Epoch: epoch, Splits: ids, JobID: p.jobID})
		cancel()
		if errors.Is(err, api.ErrHandBackRefused) {
			// Refused, nothing changed: they are this worker's to read.
			p.n.log.Info("draining: splits not handed back; reading them before leaving", "job", p.job, "epoch", epoch, "splits", len(ids), "reason", err)
			continue
		}
		if err != nil {
			// Unknown outcome (the hand-back may have committed, and
			// another worker may read them): never read them here. They
			// stay this worker's if it did not commit: lost at-most-once,
			// read again exactly-once, once the node has left.
			p.n.log.Warn("draining: handing splits back failed; not reading them", "job", p.job, "epoch", epoch, "splits", len(ids), "err", err)
		} else {
			p.n.log.Info("draining: splits handed back to the other workers", "job", p.job, "epoch", epoch, "splits", len(ids))
		}
		for _, id := range ids {
			back[[2]int64{epoch, id}] = true
		}
	}
	p.queue = slices.DeleteFunc(p.queue, func(ls leasedSplit) bool { return back[[2]int64{ls.epoch, ls.id}] })
}

// enqueue queues a lease's splits.
func (p *leaseProvider) enqueue(resp api.LeaseResponse) {
	for i, id := range resp.Splits {
		ls := leasedSplit{id: id, epoch: resp.Epoch, cut: max(resp.Cut, p.cutSeen), census: resp.Census}
		if i < len(resp.Exclude) {
			ls.exclude = resp.Exclude[i]
		}
		p.queue = append(p.queue, ls)
	}
}

// awaitMore (exactly-once) is called when a phase has ended: every split
// this worker leased is produced, and the leases are done. It asks again
// every OrphanPollInterval until a lease brings splits (a dead worker's,
// to read again: true, and Next hands them out) or says every split of
// the job is produced (false: the task ends, and its streams end once
// they have sent its queue). The caller runs a new pipeline for each phase, so
// that the last one's partial batches are flushed, not held back waiting.
func (p *leaseProvider) awaitMore() (bool, error) {
	p.flush()
	p.wg.Wait() // the last reports go first
	t := time.NewTicker(p.n.cfg.Worker.OrphanPollInterval)
	defer t.Stop()
	// A request whose call failed goes out again unchanged, with its id:
	// it may have committed (only its answer lost), and the leader then
	// answers with the same lease. A new id would leave those splits
	// leased to this worker, which would never read them: the job would
	// never end (every worker polling for splits nobody reads).
	var retry *api.LeaseRequest
	for {
		if p.drained || p.draining() {
			return false, nil // the others read what is orphaned from now on
		}
		select {
		case <-t.C:
		case <-p.drain:
			continue
		case <-p.ctx.Done():
			return false, p.ctx.Err()
		}
		if retry == nil {
			p.reqID++
			retry = &api.LeaseRequest{Job: p.job, Worker: p.n.name, RequestID: p.reqID, N: p.policy.size(), Incarnation: p.n.incarnation, JobID: p.jobID, Held: p.heldHint()}
		}
		resp, err := p.n.lease(p.ctx, *retry)
		if err == nil {
			retry = nil
		}
		switch {
		case errors.Is(err, api.ErrNotAssigned):
			return false, nil // expired: as in Next
		case p.releasedBy(p.ctx, err):
			return false, nil
		case err != nil:
			if p.ctx.Err() != nil {
				return false, p.ctx.Err()
			}
			p.n.log.Warn("exactly-once: asking for splits to read again; will retry", "job", p.job, "err", err)
			continue
		case resp.AllProduced:
			return false, nil
		case len(resp.Splits) > 0:
			p.enqueue(resp)
			p.policy.done = resp.Done
			return true, nil
		}
	}
}

// produced (exactly-once) reports splits whose every element the
// pipeline has emitted, in the background. One report is in flight at a
// time, at most one starts every WorkerConfig.ProduceInterval, and each
// carries every split completed since the one before (one request per
// epoch), so a fast pipeline of small splits costs a few Raft commands a
// second, not one per split nor one per commit's round trip. flush sends
// what is pending without waiting for the interval (the end of a phase).
// Unlike finished splits, produced ones are part of delivery (the job
// cannot end without them), so a failed report is retried until it lands,
// is refused for good (a retry of one that landed is refused as not
// leased), or the task ends.
func (p *leaseProvider) produced(cs []pipeline.CompletedSplit) {
	if len(cs) == 0 {
		return
	}
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.pending = append(p.pending, cs...)
	if p.sending {
		return
	}
	p.sending = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		interval := p.n.cfg.Worker.produceInterval()
		for {
			p.pmu.Lock()
			batch := p.pending
			p.pending = nil
			if len(batch) == 0 || p.ctx.Err() != nil {
				p.sending, p.urgent = false, false
				select {
				case <-p.flushed: // a flush this goroutine has served
				default:
				}
				p.pmu.Unlock()
				return
			}
			p.pmu.Unlock()
			start := time.Now()
			p.sendProduced(batch)
			p.pmu.Lock()
			urgent := p.urgent
			p.pmu.Unlock()
			if wait := interval - time.Since(start); wait > 0 && !urgent {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-p.flushed:
				case <-p.ctx.Done():
				}
				t.Stop()
			}
		}
	}()
}

// flush has the produced splits pending reported now, not at the next
// ProduceInterval, and the reporting goroutine end as soon as nothing is
// pending (awaitMore and close wait for it).
func (p *leaseProvider) flush() {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if !p.sending {
		return
	}
	p.urgent = true
	select {
	case p.flushed <- struct{}{}:
	default:
	}
}

// Bounds of one produced-splits request: what one ProduceSplits command
// may carry (fsm.MaxReceipts entries), and intervals enough to stay
// well under the default raftnode.Config.MaxCommandBytes (1 MiB) at up
// to 18 bytes an interval. A report over either goes out as several.
const (
	maxProduceSplits    = fsm.MaxReceipts
	maxProduceIntervals = 1 << 15
)

// sendProduced sends one report of produced splits, one request per
// epoch (more past maxProduceSplits or maxProduceIntervals), retrying as
// produced says.
func (p *leaseProvider) sendProduced(cs []pipeline.CompletedSplit) {
	byEpoch := map[int64][]ranges.SplitEmitted{}
	for _, c := range cs {
		byEpoch[c.Epoch] = append(byEpoch[c.Epoch], ranges.SplitEmitted{Split: c.Split, Emitted: c.Emitted})
	}
	for _, epoch := range slices.Sorted(maps.Keys(byEpoch)) {
		for done := byEpoch[epoch]; len(done) > 0; {
			n, intervals := 0, 0
			for n < len(done) && n < maxProduceSplits && (n == 0 || intervals+done[n].Emitted.Intervals() <= maxProduceIntervals) {
				intervals += done[n].Emitted.Intervals()
				n++
			}
			if !p.sendProducedOnce(api.ProduceRequest{Job: p.job, Worker: p.n.name, Epoch: epoch, Splits: done[:n], JobID: p.jobID}) {
				return
			}
			done = done[n:]
		}
	}
}

// sendProducedOnce sends one request until it lands or is refused for
// good; false if the task ended first.
func (p *leaseProvider) sendProducedOnce(req api.ProduceRequest) bool {
	for attempt := 1; ; attempt++ {
		err := p.n.produce(p.ctx, req)
		if err == nil {
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		if !retriable(err) {
			if attempt == 1 {
				p.n.log.Warn("exactly-once: produced splits refused (worker expired?): they will be read again elsewhere", "job", p.job, "splits", len(req.Splits), "err", err)
			}
			return true
		}
		p.n.log.Warn("exactly-once: report produced splits; will retry", "job", p.job, "splits", len(req.Splits), "attempt", attempt, "err", err)
		select {
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		case <-p.ctx.Done():
			return false
		}
	}
}

// collect queues the splits of a lease answered while the queue still
// holds some. Taken only once the queue ran out, an answer kept the policy
// from asking ahead meanwhile (the lease still counted in flight) and made
// leases look as slow as the queue was long: the queue then swung between
// a failover's worth and a lease's worth, and a leader that died while it
// was low stalled the worker. A failed answer is left for when the queue
// runs out, as before, so the splits queued are read first.
func (p *leaseProvider) collect() {
	select {
	case r := <-p.answer:
		if p.releasedBy(p.ctx, r.err) {
			return
		}
		if r.err != nil {
			p.answer <- r // capacity 1, just emptied; the one lease in flight has answered
			return
		}
		p.policy.answered(time.Now(), r.resp.Done)
		p.enqueue(r.resp)
	default:
	}
}

// ask reports the finished splits and asks for a lease of n splits, each
// in a goroutine that close waits for.
func (p *leaseProvider) ask(n int) {
	p.reqID++
	finished := p.finished
	p.finished = nil
	req := api.LeaseRequest{Job: p.job, Worker: p.n.name, RequestID: p.reqID, N: n, Incarnation: p.n.incarnation, JobID: p.jobID, Held: p.heldHint()}
	p.send(req)
	if len(finished) > 0 {
		// The report is not on the lease's critical path.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.report(p.ctx, finished)
		}()
	}
}

// send asks for a lease in a goroutine that close waits for; the answer
// comes on p.answer.
func (p *leaseProvider) send(req api.LeaseRequest) {
	p.lastReq = req
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		resp, err := p.n.lease(p.ctx, req)
		p.answer <- leaseResult{resp: resp, err: err}
	}()
}

// report sends finished splits, one request per epoch. It is bookkeeping
// (progress in `feedmesh jobs`), not part of delivery, so a failure is
// logged and the task goes on: a retried report whose first attempt did
// commit is rejected as "not outstanding", harmlessly.
func (p *leaseProvider) report(ctx context.Context, finished []leasedSplit) {
	byEpoch := map[int64][]int64{}
	for _, f := range finished {
		byEpoch[f.epoch] = append(byEpoch[f.epoch], f.id)
	}
	for epoch, ids := range byEpoch {
		req := api.FinishRequest{Job: p.job, Worker: p.n.name, Epoch: epoch, Splits: ids}
		if err := p.n.finish(ctx, req); err != nil && ctx.Err() == nil {
			p.n.log.Warn("report finished splits", "job", p.job, "splits", len(ids), "err", err)
		}
	}
}

// close waits for a lease in flight and reports what is left.
func (p *leaseProvider) close() {
	p.flush()
	p.wg.Wait()
	if p.reading {
		p.finished = append(p.finished, p.current)
		p.reading = false
	}
	// The production may end because its context was cancelled (its last
	// job left): report anyway, under the node's context (a closing node
	// does not wait) and a bound of its own, or the splits it did read would
	// stay outstanding in the job's progress for good.
	ctx, cancel := context.WithTimeout(p.n.ctx, p.n.cfg.RequestTimeout)
	defer cancel()
	p.report(ctx, p.finished)
	p.finished = nil
}

// splitByID returns the split with the given id: ids are positions in the
// deterministic enumeration every node computes.
func splitByID(all pipeline.SplitList, id int64) (pipeline.Split, error) {
	s, ok := all.ByID(id)
	if !ok {
		return pipeline.Split{}, fmt.Errorf("split %d does not exist in this worker's view of the dataset (%d splits): do all nodes see the same files?", id, all.Len())
	}
	return s, nil
}
