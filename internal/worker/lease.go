package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
)

// Leaser is one DYNAMIC production's lease loop: a pipeline.SplitProvider
// fed with splits leased through Control, many per lease, that reports
// the splits the pipeline has read (finished) along with the next
// request, or emitted (Produced). When to ask and for how many is
// leasePolicy's decision; Leaser does the I/O: it asks in the background
// while the pipeline still reads the current lease, so a Raft round trip
// does not stall it.
type Leaser struct {
	ctx    context.Context
	cfg    LeaseConfig
	ctl    Control
	log    *slog.Logger
	policy leasePolicy

	drained bool // handed back what it could: ends once the queue is read
	over    bool // every split is produced, or the worker was expired
	expired bool // the job expired this worker (api.ErrNotAssigned)

	queue   []leasedSplit
	current leasedSplit
	reading bool             // current was handed to the pipeline, not yet finished
	reqID   uint64           // of the last lease asked for
	lastReq api.LeaseRequest // sent again after a failure whose outcome is unknown
	retries int              // failed attempts of lastReq in a row

	// cut is the cut the running pipeline was opened with. A leased
	// split with another ends the pipeline's phase (recut): the task
	// opens one with the split's cut (NextCut) and reads on.
	cut   int
	recut bool
	// census: the running pipeline is a census (splits/census.go): it
	// runs dead workers' splits of an at-most-once job to count what
	// they emit, and delivers nothing. A split of the other kind ends
	// the phase, as a split of another cut does (recut), so that no
	// batch mixes counted and delivered elements.
	census bool
	// cutSeen is the job's cut as last learned (learnCut).
	cutSeen int

	finished []leasedSplit // read completely, not yet reported

	prod   producedReports
	answer chan leaseResult // capacity 1: the background lease's answer
	wg     sync.WaitGroup   // lease and finished-report goroutines
}

type leasedSplit struct {
	id, epoch int64
	exclude   ranges.Set // exactly-once: indices already delivered
	cut       int        // the job's cut when leased (0: none)
	census    bool       // run to count, not to deliver (api.LeaseResponse.Census)
}

type leaseResult struct {
	resp api.LeaseResponse
	err  error
}

// NewLeaser leases cfg.Job's splits for cfg.Worker through ctl until ctx
// ends. Close waits for what it started.
func NewLeaser(ctx context.Context, ctl Control, cfg LeaseConfig) *Leaser {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Leaser{ctx: ctx, cfg: cfg, ctl: ctl, log: log.With("job", cfg.Job),
		policy: newLeasePolicy(max(cfg.LeaseSplits, 1), cfg.LeaseDuration, cfg.FailoverAhead),
		// Request ids start from the clock, not 1: a loop created again
		// for the same (job, worker), as a shared production is after its
		// jobs all left, must not have its first lease taken for a retry
		// of the last.
		reqID:  uint64(time.Now().UnixNano()),
		answer: make(chan leaseResult, 1),
		cut:    cfg.Cut, cutSeen: cfg.Cut,
	}
	p.policy.hold = holdSplits(cfg.Splits.Len(), cfg.HoldShare)
	p.prod.init(p)
	return p
}

// Expired reports whether the job expired this worker (a pause, a gossip
// blip: its leases were counted lost); its part of the job has ended.
func (p *Leaser) Expired() bool { return p.expired }

// Over reports whether no split will come to this worker again: every
// split is produced, or it was expired.
func (p *Leaser) Over() bool { return p.over }

// stopping reports whether Config.Stop is done.
func (p *Leaser) stopping() bool { return p.cfg.Stop != nil && p.cfg.Stop.Err() != nil }

// Next implements pipeline.SplitProvider. Being asked for the next split
// means the pipeline's source has read the previous one completely.
func (p *Leaser) Next(ctx context.Context) (pipeline.ProvidedSplit, error) {
	finished := p.reading
	if finished {
		if !p.cfg.Exact {
			p.finished = append(p.finished, p.current)
		}
		p.reading = false
	}
	// A split read with exclusions (a resumed job's, an orphan read
	// again) is not timed: what it excludes costs no op work, so its
	// time says nothing of the pipeline's rate (leasePolicy).
	ps, err := p.next(ctx, finished && len(p.current.exclude) == 0)
	if err != nil {
		p.gateBusy(false)
		if len(p.finished) > 0 {
			p.reportFinished() // the phase ended: the job's progress counts them now
		}
		return ps, err
	}
	p.current, p.reading = leasedSplit{id: ps.Split.ID, epoch: ps.Epoch, exclude: ps.Exclude}, true
	return ps, nil
}

// timed: the pipeline has read the split before, which had no exclusions,
// so the time since the one before it is the time of one split.
func (p *Leaser) next(ctx context.Context, timed bool) (pipeline.ProvidedSplit, error) {
	if p.stopping() {
		return pipeline.ProvidedSplit{}, io.EOF // what it holds goes to the nodes
	}
	if p.draining() {
		p.handBack(ctx)
	} else {
		p.collect()
		if p.cfg.Gate != nil && !p.cfg.Gate.Open() {
			p.policy.observe(time.Now(), timed) // held to its share: no lease ahead
		} else if n := p.policy.next(time.Now(), timed, len(p.queue)); n > 0 {
			p.ask(n)
		}
	}
	if len(p.queue) == 0 && p.cfg.Waited != nil {
		start := time.Now()
		defer func() { p.cfg.Waited.Add(int64(time.Since(start))) }()
	}
	for len(p.queue) == 0 {
		if p.drained || p.over || p.stopping() {
			return pipeline.ProvidedSplit{}, io.EOF
		}
		if !p.policy.inflight && !p.policy.done && p.cfg.Gate != nil {
			switch err := p.waitGate(ctx); {
			case errors.Is(err, ErrJobEnded):
				// Held to a share of 0 while the nodes read the rest:
				// the job ended without this worker asking again.
				p.over = true
				return pipeline.ProvidedSplit{}, io.EOF
			case err != nil:
				return pipeline.ProvidedSplit{}, err
			case p.stopping():
				return pipeline.ProvidedSplit{}, io.EOF
			}
		}
		n, end := p.policy.empty(time.Now())
		if end {
			return pipeline.ProvidedSplit{}, io.EOF
		}
		if n > 0 {
			p.ask(n)
		}
		if err := p.await(ctx); err != nil {
			return pipeline.ProvidedSplit{}, err
		}
	}
	p.learnCut()
	if (!p.cfg.WholePipeline && p.queue[0].cut != p.cut) || p.queue[0].census != p.census {
		p.recut = true
		return pipeline.ProvidedSplit{}, io.EOF
	}
	ls := p.queue[0]
	p.queue = p.queue[1:]
	s, ok := p.cfg.Splits.ByID(ls.id)
	if !ok {
		return pipeline.ProvidedSplit{}, fmt.Errorf("split %d does not exist in worker %s's view of the dataset (%d splits): do all nodes and clients see the same files?", ls.id, p.cfg.Worker, p.cfg.Splits.Len())
	}
	return pipeline.ProvidedSplit{Split: s, Epoch: ls.epoch, Exclude: ls.exclude}, nil
}

// await takes the answer of the lease in flight (with nothing queued).
func (p *Leaser) await(ctx context.Context) error {
	var stop <-chan struct{}
	if p.cfg.Stop != nil {
		stop = p.cfg.Stop.Done()
	}
	select {
	case r := <-p.answer:
		return p.take(ctx, r)
	case <-p.cfg.Drain:
		p.handBack(ctx)
		return nil
	case <-stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take applies the answer to the lease in flight.
func (p *Leaser) take(ctx context.Context, r leaseResult) error {
	if p.dismissedBy(ctx, r.err) {
		return nil
	}
	if errors.Is(r.err, api.ErrNotAssigned) {
		p.expire()
		return nil
	}
	p.policy.answered(time.Now(), r.err == nil && (r.resp.Done || r.resp.AllProduced))
	if r.err != nil && Retriable(r.err) && ctx.Err() == nil {
		// No leader for longer than a request waits (an election on
		// loaded cores, a partition): the job waits for one, it does not
		// fail. The same request goes out again (it may have committed:
		// its id makes the leader answer with the same lease).
		p.retries++
		p.log.Warn("lease splits: no answer; asking again", "err", r.err, "attempt", p.retries)
		if !p.pause(ctx, min(time.Duration(p.retries)*100*time.Millisecond, time.Second)) {
			return ctx.Err()
		}
		p.policy.ask(time.Now())
		p.send(p.lastReq)
		return nil
	}
	p.retries = 0
	if r.err != nil {
		return fmt.Errorf("lease splits: %w", r.err)
	}
	p.enqueue(r.resp)
	if len(r.resp.Splits) == 0 && !r.resp.Done && !r.resp.AllProduced && len(p.queue) == 0 {
		// Nothing now, more later (a resumed job waits for its
		// checkpoints; a job's nodes are being turned on): ask again
		// after a poll, not at once, which would be a Raft command per
		// round trip for as long as it waits.
		if !p.pause(ctx, p.cfg.Poll) {
			return ctx.Err()
		}
	}
	return nil
}

// pause waits d, or until ctx, Stop or Drain ends it; false if ctx ended.
func (p *Leaser) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	var stop <-chan struct{}
	if p.cfg.Stop != nil {
		stop = p.cfg.Stop.Done()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	case <-p.cfg.Drain:
	case <-ctx.Done():
		return false
	}
	return true
}

// expire ends the worker's part: expired while alive (a pause, a gossip
// blip), the job counted its leases as lost, its consumers dropped it,
// and the leader never assigns it again. It leases nothing more; the
// splits it read before knowing were counted lost and are never leased
// again, so a consumer still reading its open streams gets no element
// twice.
func (p *Leaser) expire() {
	if p.policy.inflight {
		p.policy.answered(time.Now(), true)
	}
	p.policy.done = true
	if !p.expired {
		p.log.Warn("worker expired from the job while running; ending its part", "worker", p.cfg.Worker)
	}
	p.expired, p.over = true, true
	p.queue = nil
}

// waitGate is the gate's wait, ended early by Stop.
func (p *Leaser) waitGate(ctx context.Context) error {
	if p.cfg.Stop != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(p.cfg.Stop, cancel)()
	}
	err := p.cfg.Gate.Wait(ctx)
	if err != nil && p.stopping() {
		return nil
	}
	return err
}

func (p *Leaser) gateBusy(b bool) {
	if p.cfg.Gate != nil {
		p.cfg.Gate.Busy(b)
	}
}

// enqueue queues a lease's splits.
func (p *Leaser) enqueue(resp api.LeaseResponse) {
	if resp.AllProduced && len(resp.Splits) == 0 {
		p.over = true
	}
	for i, id := range resp.Splits {
		ls := leasedSplit{id: id, epoch: resp.Epoch, cut: max(resp.Cut, p.cutSeen), census: resp.Census}
		if i < len(resp.Exclude) {
			ls.exclude = resp.Exclude[i]
		}
		p.queue = append(p.queue, ls)
	}
	p.gateBusy(len(p.queue) > 0)
}

// collect queues the splits of a lease answered while the queue still
// holds some. Taken only once the queue ran out, an answer kept the policy
// from asking ahead meanwhile (the lease still counted in flight) and made
// leases look as slow as the queue was long: the queue then swung between
// a failover's worth and a lease's worth, and a leader that died while it
// was low stalled the worker. A failed answer is left for when the queue
// runs out, as before, so the splits queued are read first.
func (p *Leaser) collect() {
	select {
	case r := <-p.answer:
		if p.dismissedBy(p.ctx, r.err) {
			return
		}
		if r.err != nil {
			p.answer <- r // capacity 1, just emptied; the one lease in flight has answered
			return
		}
		p.policy.answered(time.Now(), r.resp.Done || r.resp.AllProduced)
		p.enqueue(r.resp)
	default:
	}
}

// ask reports the finished splits and asks for a lease of n splits, each
// in a goroutine that Close waits for.
func (p *Leaser) ask(n int) {
	p.reqID++
	p.send(p.leaseRequest(n))
	if len(p.finished) > 0 {
		p.reportFinished() // not on the lease's critical path
	}
}

func (p *Leaser) leaseRequest(n int) api.LeaseRequest {
	req := api.LeaseRequest{Job: p.cfg.Job, Worker: p.cfg.Worker, RequestID: p.reqID, N: n, Incarnation: p.cfg.Incarnation, JobID: p.cfg.JobID, RunsCensus: p.cfg.RunsCensus}
	if p.cfg.Held != nil {
		req.Held = p.cfg.Held()
	}
	return req
}

// send asks for a lease in a goroutine that Close waits for; the answer
// comes on p.answer.
func (p *Leaser) send(req api.LeaseRequest) {
	p.lastReq = req
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		resp, err := p.ctl.Lease(p.ctx, req)
		p.answer <- leaseResult{resp: resp, err: err}
	}()
}

// reportFinished sends the finished splits in a goroutine that Close
// waits for.
func (p *Leaser) reportFinished() {
	finished := p.finished
	p.finished = nil
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.report(p.ctx, finished)
	}()
}

// report sends finished splits, one request per epoch. It is bookkeeping
// (progress in `feedmesh jobs`, and the job's end at-most-once), not part
// of delivery, so a failure is logged and the task goes on: a retried
// report whose first attempt did commit is rejected as "not outstanding",
// harmlessly.
func (p *Leaser) report(ctx context.Context, finished []leasedSplit) {
	byEpoch := map[int64][]int64{}
	for _, f := range finished {
		byEpoch[f.epoch] = append(byEpoch[f.epoch], f.id)
	}
	for epoch, ids := range byEpoch {
		req := api.FinishRequest{Job: p.cfg.Job, Worker: p.cfg.Worker, Epoch: epoch, Splits: ids}
		if err := p.ctl.Finish(ctx, req); err != nil && ctx.Err() == nil {
			p.log.Warn("report finished splits", "splits", len(ids), "err", err)
		}
	}
}

// Close waits for a lease in flight and reports what is left. parent
// bounds the last report (a node's context: a closing node does not
// wait), with Config.RequestTimeout.
func (p *Leaser) Close(parent context.Context) {
	p.prod.flush()
	p.prod.wg.Wait()
	p.wg.Wait()
	if p.reading {
		if !p.cfg.Exact {
			p.finished = append(p.finished, p.current)
		}
		p.reading = false
	}
	if len(p.finished) == 0 {
		return
	}
	// The production may end because its context was cancelled (its last
	// job left): report anyway, under parent and a bound of its own, or
	// the splits it did read would stay outstanding in the job's progress
	// for good.
	ctx, cancel := context.WithTimeout(parent, p.cfg.RequestTimeout)
	defer cancel()
	p.report(ctx, p.finished)
	p.finished = nil
}
