package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// The local worker: the job's pipeline run in the client's own process,
// beside the nodes (offload local, or a fraction). It is just another
// worker of the job: it leases DYNAMIC splits through the cluster's API
// under the name jobspec.LocalWorkerName(consumer), runs them through the
// pipeline engine, and, exactly-once, reports the splits it emitted
// (produced) while the consumer's ledger receipts their elements as it
// does a node's. The cluster expires it with its consumer, so a client
// that dies with leases loses nothing and duplicates nothing: its
// unsettled splits are read again by the nodes (internal/fsm/offload.go).
//
// Its share of the job is held by a gate: before it takes its next split
// it waits until what it prepared is at most its fraction of everything
// the consumer received (shareGate).

// localConfig is what a local worker needs.
type localConfig struct {
	job, consumer string
	jobID         uint64
	spec          *pipeline.Spec
	exact         bool
	batched       bool
	cores         float64
	leaseSplits   int
	poll          time.Duration
}

// localHost is what the local worker needs of its Iterator.
type localHost interface {
	call(ctx context.Context, method string, req, resp any) error
	put(ctx context.Context, x item) error
	logger() *slog.Logger
}

type localWorker struct {
	cfg    localConfig
	name   string
	h      localHost
	ledger *ledger
	gate   *shareGate
	all    pipeline.SplitList
	reqID  uint64

	pmu     sync.Mutex
	pending []pipeline.CompletedSplit // produced, not yet reported

	// running is the pipeline running now (a pump's), for its
	// statistics (offload auto's per-op profile).
	running atomic.Value  // of statser
	blocked *atomic.Int64 // if not nil, adds the ns it waited to put a batch or for its share
	expired atomic.Bool   // the cluster expired it: its part ended
	seq     uint64

	// Retiring (exactly-once): the consumer ends its local worker while
	// it reads on (retire). The worker stops at the next batch, has the
	// cluster expire it (its undelivered splits go to the nodes once the
	// consumer fences it) and fences it; what it made before is delivered.
	retireCtx context.Context // done once retire is called
	retire    context.CancelFunc
	retired   atomic.Bool // the cluster expired it at its consumer's request
}

func newLocalWorker(cfg localConfig, h localHost, l *ledger, g *shareGate) (*localWorker, error) {
	all, err := pipeline.ListSplits(cfg.spec)
	if err != nil {
		return nil, fmt.Errorf("local worker: %w", err)
	}
	w := &localWorker{cfg: cfg, name: jobspec.LocalWorkerName(cfg.consumer), h: h, ledger: l, gate: g, all: all,
		reqID: uint64(time.Now().UnixNano())}
	// retire (safe to call more than once, from any goroutine) asks the
	// worker to end its part of the job (exactly-once).
	w.retireCtx, w.retire = context.WithCancel(context.Background())
	return w, nil
}

// retiring reports whether retire was called.
func (w *localWorker) retiring() bool {
	if w == nil {
		return false
	}
	return w.retireCtx.Err() != nil
}

// retireNow has the cluster expire the worker and fences it: called by
// pump once it takes no more elements from the pipeline, before the
// batches already receipted are put (they may wait for the consumer,
// and the consumer's other ranks may wait for the splits this worker
// held). The fence goes out in the ledger's next report, after the
// receipts of every batch the worker made: from then on the nodes read
// its splits again without them.
func (w *localWorker) retireNow(ctx context.Context) error {
	if !w.cfg.exact || w.retired.Load() {
		return nil
	}
	if err := w.flushProduced(ctx); err != nil {
		return err
	}
	req := api.OffloadRequest{Job: w.cfg.job, Consumer: w.cfg.consumer, Retire: true, Remote: "on"}
	// Not assigned: the consumer, and with it the worker, is gone.
	if err := w.callRetrying(ctx, "retire", api.MethodOffload, req, nil); err != nil && !errors.Is(err, api.ErrNotAssigned) {
		return fmt.Errorf("local worker: retire: %w", err)
	}
	w.ledger.fence(w.name)
	w.retired.Store(true)
	w.gate.busy(false)
	return nil
}

// run produces until every split is produced, a failure, or ctx's end.
func (w *localWorker) run(ctx context.Context) error {
	var rwg sync.WaitGroup
	rctx, stop := context.WithCancel(ctx)
	if w.cfg.exact {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			w.reportLoop(rctx)
		}()
	}
	defer func() {
		stop()
		rwg.Wait()
	}()
	lctx, lcancel := context.WithCancel(ctx)
	p := &localProvider{w: w, ctx: lctx, answer: make(chan leaseAnswer, 1)}
	defer func() {
		lcancel() // a lease asked ahead that is still retrying
		p.wg.Wait()
	}()
	defer w.gate.busy(false)
	for {
		if err := w.pump(ctx, p); err != nil {
			return err
		}
		if p.over || !w.cfg.exact || w.retired.Load() {
			return nil
		}
		// A phase ended (the leases said done): the pipeline was closed so
		// its last partial batch went out; now wait for a dead worker's
		// splits to read again, or the end.
		if err := w.flushProduced(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		more, err := p.awaitMore(ctx) // no work: not counted against its capacity
		w.addBlocked(t0)
		if err != nil {
			return err
		}
		if w.retiring() {
			return w.retireNow(ctx) // between phases: nothing waits to be put
		}
		if !more {
			return nil
		}
	}
}

// pump runs one pipeline over the provider's splits to its end.
// Exactly-once, a batch reaches the trainer only once the cluster has its
// receipt (write-ahead): were this process to die, what its trainer got
// is then excluded when the nodes read the worker's splits again, and
// nothing else is. Up to localAhead batches wait for their receipts at
// once, so the pipeline does not wait a commit per batch.
func (w *localWorker) pump(ctx context.Context, p *localProvider) (err error) {
	p.phaseDone = false
	it, err := pipeline.OpenWithOptions(ctx, capParallelism(w.cfg.spec, w.cfg.cores), nil,
		pipeline.Options{Provider: p, Track: w.cfg.exact, Cores: func() float64 { return w.cfg.cores }})
	if err != nil {
		return fmt.Errorf("local worker: %w", err)
	}
	defer it.Close()
	if sp, ok := it.(statser); ok {
		w.running.Store(sp)
	}
	tr, _ := it.(pipeline.Tracker)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ahead := make(chan acked, localAhead)
	putErr := make(chan error, 1)
	go func() { putErr <- w.putAcked(pctx, ahead) }()
	defer func() {
		close(ahead)
		if perr := <-putErr; err == nil {
			err = perr
		}
	}()
	for {
		if w.retiring() {
			return w.retireNow(ctx)
		}
		el, err := it.Next(pctx)
		if errors.Is(err, io.EOF) {
			if tr != nil {
				w.produced(tr.Completed())
			}
			if w.retiring() {
				return w.retireNow(ctx)
			}
			return nil
		}
		if err != nil {
			if pctx.Err() != nil && ctx.Err() == nil {
				return nil // the putting goroutine failed: its error is returned
			}
			return fmt.Errorf("local worker: %w", err)
		}
		a := acked{x: item{b: Batch{Element: el, Worker: w.name, Seq: w.seq, batched: w.cfg.batched}, size: int64(el.ByteSize())}}
		w.seq++
		if tr != nil {
			for _, se := range tr.LastProvenance() {
				a.x.prov = batch.AppendProv(a.x.prov, se.Epoch, se.Split, se.Indices)
			}
			if len(a.x.prov) > 0 {
				a.x.b.Epoch = a.x.prov[0].Epoch
			}
			if w.ledger != nil {
				var dup bool
				if dup, a.report = w.ledger.recordNow(a.x.prov); dup {
					w.h.logger().Error("exactly-once: the local worker made a batch received before (a bug: please report it)", "job", w.cfg.job)
					continue
				}
			}
			w.produced(tr.Completed())
		}
		select {
		case ahead <- a:
		case <-w.retireCtx.Done():
			// Its consumer's buffer is full and may stay so while the
			// consumer's other ranks wait for the splits this worker
			// holds: hand them on first, then deliver a (received).
			if err := w.retireNow(ctx); err != nil {
				return err
			}
			select {
			case ahead <- a:
			case <-pctx.Done():
				return nil
			}
		case <-pctx.Done():
			return nil
		}
	}
}

// localAhead bounds the local worker's batches waiting for their
// receipts' commit.
const localAhead = 8

// acked is a local batch and the report that carries its receipt (0:
// none, at-most-once).
type acked struct {
	x      item
	report uint64
}

// putAcked puts each batch once its receipt is committed, in order,
// until in is closed; on a failure it cancels nothing itself (pump's ctx
// ends with it) and drains in.
func (w *localWorker) putAcked(ctx context.Context, in <-chan acked) error {
	var err error
	for a := range in {
		if err != nil {
			continue
		}
		if a.report > 0 {
			err = w.ledger.acked.wait(ctx, a.report)
		}
		if err == nil {
			t0 := time.Now()
			err = w.h.put(ctx, a.x)
			w.addBlocked(t0)
		}
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// produced queues splits emitted completely for the next report.
func (w *localWorker) produced(cs []pipeline.CompletedSplit) {
	if len(cs) == 0 {
		return
	}
	w.pmu.Lock()
	w.pending = append(w.pending, cs...)
	w.pmu.Unlock()
}

// reportLoop reports produced splits every poll interval until ctx ends,
// then once more.
func (w *localWorker) reportLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = w.flushProduced(fctx)
			cancel()
			return
		case <-t.C:
		}
		if err := w.flushProduced(ctx); err != nil && ctx.Err() == nil {
			w.h.logger().Warn("local worker: report produced splits; will retry", "job", w.cfg.job, "err", err)
		}
	}
}

// flushProduced reports what is pending, one request per epoch; a failed
// request stays pending (a retry of one that landed is refused as not
// leased, harmlessly: it is dropped then).
func (w *localWorker) flushProduced(ctx context.Context) error {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	byEpoch := map[int64][]ranges.SplitEmitted{}
	for _, c := range w.pending {
		byEpoch[c.Epoch] = append(byEpoch[c.Epoch], ranges.SplitEmitted{Split: c.Split, Emitted: c.Emitted})
	}
	var left []pipeline.CompletedSplit
	var firstErr error
	for _, e := range slices.Sorted(maps.Keys(byEpoch)) {
		req := api.ProduceRequest{Job: w.cfg.job, Worker: w.name, Epoch: e, Splits: byEpoch[e], JobID: w.cfg.jobID}
		err := w.h.call(ctx, api.MethodProduce, req, nil)
		if err != nil && retriableCall(err) {
			for _, se := range byEpoch[e] {
				left = append(left, pipeline.CompletedSplit{Epoch: e, Split: se.Split, Emitted: se.Emitted})
			}
			firstErr = cmpErr(firstErr, err)
		} else if err != nil {
			w.h.logger().Warn("local worker: produced splits refused (expired?)", "job", w.cfg.job, "err", err)
		}
	}
	w.pending = left
	return firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// retriableCall reports whether a failed control call may succeed when
// sent again (no leader for a while, a node unreachable).
func retriableCall(err error) bool {
	switch {
	case errors.Is(err, api.ErrNotAssigned), errors.Is(err, transport.ErrInvalid), errors.Is(err, transport.ErrNotFound),
		errors.Is(err, transport.ErrUnknownMethod):
		return false
	}
	return true
}

// lease asks for n splits; a failed request whose outcome is unknown is
// sent again with its id, so that a lease that committed is answered
// again, not lost to this worker.
func (w *localWorker) lease(ctx context.Context, n int) (api.LeaseResponse, error) {
	w.reqID++
	req := api.LeaseRequest{Job: w.cfg.job, Worker: w.name, RequestID: w.reqID, N: n, JobID: w.cfg.jobID}
	var resp api.LeaseResponse
	err := w.callRetrying(ctx, "lease splits", api.MethodLease, req, &resp)
	return resp, err
}

// callRetrying calls method until it succeeds, fails for good
// (retriableCall), or ctx ends, waiting a little longer after each
// failure (up to a second).
func (w *localWorker) callRetrying(ctx context.Context, what, method string, req, resp any) error {
	for attempt := 1; ; attempt++ {
		err := w.h.call(ctx, method, req, resp)
		if err == nil || !retriableCall(err) || ctx.Err() != nil {
			return err
		}
		w.h.logger().Warn("local worker: "+what+"; asking again", "job", w.cfg.job, "err", err)
		select {
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// localProvider is the local worker's pipeline.SplitProvider.
type localProvider struct {
	w         *localWorker
	ctx       context.Context // the worker's run: a lease asked ahead outlives a phase
	queue     []pipeline.ProvidedSplit
	phaseDone bool // the last lease said done: end the phase once the queue is read
	over      bool // every split is produced (or the worker was expired)
	// A lease asked ahead, while the queue still holds half a lease, so
	// the pipeline does not wait a commit per lease; its answer comes on
	// answer (capacity 1). run waits for it (wg).
	inflight bool
	answer   chan leaseAnswer
	wg       sync.WaitGroup
	// At-most-once, a split is finished once the pipeline asks for the
	// next one (as a node's provider says): finished splits are reported
	// before a lease and at the end of a phase, so that the job's
	// progress counts them and its end (every split finished) comes.
	current  doneSplit
	reading  bool
	finished []doneSplit
}

type doneSplit struct{ epoch, id int64 }

// finishCurrent notes that the split being read is finished
// (at-most-once).
func (p *localProvider) finishCurrent() {
	if p.reading {
		p.finished = append(p.finished, p.current)
		p.reading = false
	}
}

// reportFinished sends the finished splits, one request per epoch. It is
// bookkeeping, as a node's report: a failure is logged and the splits
// stay outstanding in the job's progress.
func (p *localProvider) reportFinished(ctx context.Context) {
	if len(p.finished) == 0 {
		return
	}
	byEpoch := map[int64][]int64{}
	for _, f := range p.finished {
		byEpoch[f.epoch] = append(byEpoch[f.epoch], f.id)
	}
	p.finished = nil
	for _, epoch := range slices.Sorted(maps.Keys(byEpoch)) {
		req := api.FinishRequest{Job: p.w.cfg.job, Worker: p.w.name, Epoch: epoch, Splits: byEpoch[epoch]}
		if err := p.w.h.call(ctx, api.MethodFinish, req, nil); err != nil && ctx.Err() == nil {
			p.w.h.logger().Warn("local worker: report finished splits", "job", p.w.cfg.job, "splits", len(req.Splits), "err", err)
		}
	}
}

type leaseAnswer struct {
	resp api.LeaseResponse
	err  error
}

// askAhead leases in the background.
func (p *localProvider) askAhead() {
	p.inflight = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		resp, err := p.w.lease(p.ctx, p.w.cfg.leaseSplits)
		p.answer <- leaseAnswer{resp, err}
	}()
}

// take applies a lease's answer; over or err end the phase.
func (p *localProvider) take(ctx context.Context, a leaseAnswer) error {
	w := p.w
	if errors.Is(a.err, api.ErrNotAssigned) {
		w.expired.Store(true)
		p.over = true
		return nil
	}
	if a.err != nil {
		return fmt.Errorf("lease splits: %w", a.err)
	}
	if err := p.enqueue(a.resp); err != nil {
		return err
	}
	w.gate.busy(len(p.queue) > 0)
	if a.resp.AllProduced && len(a.resp.Splits) == 0 {
		p.over = true
	} else if a.resp.Done {
		p.phaseDone = true
	} else if len(a.resp.Splits) == 0 && len(p.queue) == 0 {
		// Nothing now (the job waits for checkpoints, or the nodes'
		// part is being turned on): ask again shortly.
		t0 := time.Now()
		select {
		case <-time.After(w.cfg.poll):
		case <-ctx.Done():
			return ctx.Err()
		}
		w.addBlocked(t0)
	}
	return nil
}

// collect takes the answer of a lease asked ahead, waiting for it if wait.
func (p *localProvider) collect(ctx context.Context, wait bool) error {
	if !p.inflight {
		return nil
	}
	var a leaseAnswer
	if wait {
		select {
		case a = <-p.answer:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		select {
		case a = <-p.answer:
		default:
			return nil
		}
	}
	p.inflight = false
	return p.take(ctx, a)
}

// Next hands out the next leased split, leasing more when the queue is
// empty and the share gate lets it.
func (p *localProvider) Next(ctx context.Context) (pipeline.ProvidedSplit, error) {
	ps, err := p.next(ctx)
	if !p.w.cfg.exact {
		p.finishCurrent()
		if err == nil {
			p.current, p.reading = doneSplit{ps.Epoch, ps.Split.ID}, true
		} else {
			p.reportFinished(ctx)
		}
	}
	return ps, err
}

func (p *localProvider) next(ctx context.Context) (pipeline.ProvidedSplit, error) {
	w := p.w
	if w.retiring() {
		// What it holds goes to the nodes (retireNow): no new split.
		return pipeline.ProvidedSplit{}, io.EOF
	}
	if err := p.collect(ctx, len(p.queue) == 0); err != nil {
		return pipeline.ProvidedSplit{}, err
	}
	if len(p.queue) <= w.cfg.leaseSplits/2 && len(p.queue) > 0 && !p.inflight && !p.phaseDone && !p.over && w.gate.open() {
		p.askAhead()
	}
	for len(p.queue) == 0 {
		if p.phaseDone || p.over {
			w.gate.busy(false)
			return pipeline.ProvidedSplit{}, io.EOF
		}
		t0 := time.Now()
		err := w.waitGate(ctx)
		w.addBlocked(t0)
		if w.retiring() {
			return pipeline.ProvidedSplit{}, io.EOF
		}
		if errors.Is(err, errJobEnded) {
			// Held to a share of 0 while the nodes read the rest: the
			// job ended without this worker asking again.
			p.over = true
			w.gate.busy(false)
			return pipeline.ProvidedSplit{}, io.EOF
		}
		if err != nil {
			return pipeline.ProvidedSplit{}, err
		}
		p.reportFinished(ctx)
		resp, err := w.lease(ctx, w.cfg.leaseSplits)
		if err := p.take(ctx, leaseAnswer{resp, err}); err != nil {
			return pipeline.ProvidedSplit{}, err
		}
	}
	ps := p.queue[0]
	p.queue = p.queue[1:]
	return ps, nil
}

func (p *localProvider) enqueue(resp api.LeaseResponse) error {
	for i, id := range resp.Splits {
		s, ok := p.w.all.ByID(id)
		if !ok {
			return fmt.Errorf("local worker: split %d does not exist in the client's view of the dataset (%d splits): does the client see the same files as the nodes?", id, p.w.all.Len())
		}
		ps := pipeline.ProvidedSplit{Split: s, Epoch: resp.Epoch}
		if i < len(resp.Exclude) {
			ps.Exclude = resp.Exclude[i]
		}
		p.queue = append(p.queue, ps)
	}
	return nil
}

// awaitMore (exactly-once, between phases) asks every poll interval until
// a lease brings splits (true: run another phase) or says every split is
// produced (false).
func (p *localProvider) awaitMore(ctx context.Context) (bool, error) {
	if err := p.collect(ctx, true); err != nil {
		return false, err
	}
	if len(p.queue) > 0 {
		return true, nil
	}
	if p.over {
		return false, nil
	}
	t := time.NewTicker(p.w.cfg.poll)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.w.retireCtx.Done():
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
		resp, err := p.w.lease(ctx, p.w.cfg.leaseSplits)
		switch {
		case errors.Is(err, api.ErrNotAssigned):
			p.w.expired.Store(true)
			return false, nil
		case err != nil:
			return false, fmt.Errorf("lease splits: %w", err)
		case len(resp.Splits) > 0:
			if err := p.enqueue(resp); err != nil {
				return false, err
			}
			p.w.gate.busy(true)
			return true, nil
		case resp.AllProduced:
			return false, nil
		}
	}
}

// waitGate is the gate's wait, ended early by retire.
func (w *localWorker) waitGate(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.retireCtx, cancel)
	defer stop()
	return w.gate.wait(wctx)
}

// capParallelism returns spec with every map run with the local CPU
// budget's parallelism (rounded up): the local worker's share of the
// host. Maps keep their order unless the spec said otherwise, so the
// elements are the same.
func capParallelism(spec *pipeline.Spec, cores float64) *pipeline.Spec {
	limit := max(1, int(math.Ceil(cores)))
	s := *spec
	s.Ops = slices.Clone(spec.Ops)
	for i, op := range s.Ops {
		if op.Map != nil && op.Map.Parallelism != limit {
			m := *op.Map
			m.Parallelism = limit
			s.Ops[i].Map = &m
		}
	}
	return &s
}

// shareGate holds the local worker to its fraction of the elements the
// consumer receives. Safe for concurrent use.
type shareGate struct {
	mu       sync.Mutex
	fraction float64 // the local worker's share, in [0, 1]
	// free: neither side is held to the fraction (offload auto's
	// "shared by capacity": each prepares all it can).
	free bool
	// local and remote count the batches each side prepared since the
	// share was last set (the share holds from then on, not over what
	// went before: auto's profiling alone was all local); the totals count
	// them all.
	local, remote           int64
	totalLocal, totalRemote int64
	remoteOn                func() bool
	jobEnded                func() bool // the job's state, as last heard, is no longer running
	// localBusy: the local worker has splits to read (it is not between
	// phases, finished or gone): only then are the nodes held to their
	// share, or a node holding the last splits would wait for ever.
	localBusy bool
	changed   chan struct{} // capacity 1: a count or the fraction moved
	// slack is how many batches the local worker may run ahead of its
	// share (it leases a few splits at a time).
	slack int64
	// The wall time the nodes' batches were held (some stream waiting),
	// for offload auto's measure of their capacity.
	remoteWaiting int
	remoteSince   time.Time
	remoteHeld    time.Duration
}

// heldRemote is the wall time the nodes' batches were held so far.
func (g *shareGate) heldRemote(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.remoteHeld
	if g.remoteWaiting > 0 {
		h += now.Sub(g.remoteSince)
	}
	return h
}

func newShareGate(fraction float64, slack int64, remoteOn, jobEnded func() bool) *shareGate {
	return &shareGate{fraction: fraction, slack: slack, remoteOn: remoteOn, jobEnded: jobEnded, changed: make(chan struct{}, 1)}
}

// errJobEnded: the local worker waited for its share while the job ended.
var errJobEnded = errors.New("the job ended")

func (g *shareGate) add(local bool, n int64) {
	g.mu.Lock()
	if local {
		g.local += n
		g.totalLocal += n
	} else {
		g.remote += n
		g.totalRemote += n
	}
	g.mu.Unlock()
	g.wake()
}

func (g *shareGate) wake() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// set changes the fraction, counting from now, and holds both sides to it.
func (g *shareGate) set(f float64) { g.setHeld(f, false) }

// setFree records f as the expected share but holds neither side to it.
func (g *shareGate) setFree(f float64) { g.setHeld(f, true) }

func (g *shareGate) setHeld(f float64, free bool) {
	g.mu.Lock()
	g.fraction, g.free = f, free
	g.local, g.remote = 0, 0
	g.mu.Unlock()
	g.wake()
}

// counts are the totals and the fraction in force.
func (g *shareGate) counts() (local, remote int64, fraction float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totalLocal, g.totalRemote, g.fraction
}

// mayTake is the gate's rule for the local worker (pure): it takes more
// while its count stays within its share of the total plus its share of
// the slack, or when no node serves the job.
func mayTake(local, remote int64, fraction float64, slack int64, remoteOn bool) bool {
	if fraction >= 1 || !remoteOn {
		return true
	}
	return float64(local) <= fraction*float64(local+remote+slack)
}

// mayReceive is the rule for the nodes' batches (pure): one more is read
// while their count stays within their share of the total plus theirs of
// the slack, or while the local worker has nothing to read. The two
// shares of the slack add up to it, so one side may always go on.
func mayReceive(local, remote int64, fraction float64, slack int64, localBusy bool) bool {
	if fraction <= 0 || !localBusy {
		return true
	}
	return float64(remote) <= (1-fraction)*float64(local+remote+slack)
}

// open reports whether the local worker may take more now.
func (g *shareGate) open() bool {
	on := g.remoteOn()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.free || mayTake(g.local, g.remote, g.fraction, g.slack, on)
}

// busy says whether the local worker has splits to read.
func (g *shareGate) busy(b bool) {
	g.mu.Lock()
	g.localBusy = b
	g.mu.Unlock()
	g.wake()
}

// waitRemote blocks a node's batch until the nodes are within their
// share: the stream then grants no credit, and the node slows down.
func (g *shareGate) waitRemote(ctx context.Context) error {
	g.mu.Lock()
	open := g.free || mayReceive(g.local, g.remote, g.fraction, g.slack, g.localBusy)
	if !open {
		if g.remoteWaiting == 0 {
			g.remoteSince = time.Now()
		}
		g.remoteWaiting++
	}
	g.mu.Unlock()
	if open {
		return nil
	}
	defer func() {
		g.mu.Lock()
		g.remoteWaiting--
		if g.remoteWaiting == 0 {
			g.remoteHeld += time.Since(g.remoteSince)
		}
		g.mu.Unlock()
	}()
	return g.waitFor(ctx, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.free || mayReceive(g.local, g.remote, g.fraction, g.slack, g.localBusy)
	})
}

// gatePoll is how often a closed gate looks again without news (a node
// that stopped sending, say).
const gatePoll = 50 * time.Millisecond

// wait blocks until the local worker may take another split, or the job
// has ended (errJobEnded).
func (g *shareGate) wait(ctx context.Context) error {
	ended := false
	err := g.waitFor(ctx, func() bool {
		on := g.remoteOn()
		g.mu.Lock()
		yes := g.free || mayTake(g.local, g.remote, g.fraction, g.slack, on)
		g.mu.Unlock()
		if yes {
			return true
		}
		ended = g.jobEnded != nil && g.jobEnded()
		return ended
	})
	if err == nil && ended {
		return errJobEnded
	}
	return err
}

// waitFor waits until ok holds. ok is called without g.mu (it may
// take the Iterator's lock, which is taken before g.mu elsewhere). The changed
// channel has one waiter's worth of capacity, so every waiter also
// looks again every gatePoll.
func (g *shareGate) waitFor(ctx context.Context, ok func() bool) error {
	t := time.NewTimer(gatePoll)
	defer t.Stop()
	for {
		if ok() {
			return nil
		}
		t.Reset(gatePoll)
		select {
		case <-g.changed:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (w *localWorker) addBlocked(since time.Time) {
	if w.blocked != nil {
		w.blocked.Add(int64(time.Since(since)))
	}
}

// statser is a pipeline iterator that reports its statistics.
type statser interface{ Stats() pipeline.Stats }

// pipelineStats are the statistics of the local worker's pipeline
// running now (or last); false before any ran. Safe on a nil worker.
func (w *localWorker) pipelineStats() (pipeline.Stats, bool) {
	if w == nil {
		return pipeline.Stats{}, false
	}
	sp, ok := w.running.Load().(statser)
	if !ok {
		return pipeline.Stats{}, false
	}
	return sp.Stats(), true
}
