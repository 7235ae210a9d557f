package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/worker"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// The local worker: the job's pipeline run in the client's own process,
// beside the nodes (offload local, or a fraction). It is just another
// worker of the job: it leases DYNAMIC splits under the name
// jobspec.LocalWorkerName(consumer) through the same lease loop as a node
// (worker.Leaser, over the client's control calls), runs them through the
// pipeline engine, and, exactly-once, reports the splits it emitted
// (produced) while the consumer's ledger receipts their elements as it
// does a node's. Unlike a node it runs the whole pipeline (a cut does not
// apply to it: offload auto retires it when it cuts the job). It runs a
// census (at-most-once with a loss count) as a node does, in a phase of
// its own that delivers nothing: it holds one of the job's worker slots,
// so once it is the job's one live worker, no node would come to run it.
// The cluster expires it with its consumer, so a client
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
	gate   *fractionGate
	all    pipeline.SplitList
	lp     *worker.Leaser // the run's lease loop (set by run)

	// running is the pipeline running now (a pump's), for its
	// statistics (offload auto's per-op profile).
	running atomic.Value  // of statser
	blocked *atomic.Int64 // if not nil, adds the ns it waited to put a batch, for a split or for its share
	seq     uint64

	// Retiring (exactly-once): the consumer ends its local worker while
	// it reads on (retire). The worker stops at the next batch, has the
	// cluster expire it (its undelivered splits go to the nodes once the
	// consumer fences it) and fences it; what it made before is delivered.
	retireCtx context.Context // done once retire is called
	retire    context.CancelFunc
	retired   atomic.Bool // the cluster expired it at its consumer's request
}

// localLeaseDuration is how much work the local worker aims to lease at
// once, as a node's WorkerConfig.LeaseDuration.
const localLeaseDuration = 250 * time.Millisecond

func newLocalWorker(cfg localConfig, h localHost, l *ledger, g *fractionGate) (*localWorker, error) {
	all, err := pipeline.ListSplits(cfg.spec)
	if err != nil {
		return nil, fmt.Errorf("local worker: %w", err)
	}
	w := &localWorker{cfg: cfg, name: jobspec.LocalWorkerName(cfg.consumer), h: h, ledger: l, gate: g, all: all}
	// retire (safe to call more than once, from any goroutine) asks the
	// worker to end its part of the job (exactly-once).
	w.retireCtx, w.retire = context.WithCancel(context.Background())
	return w, nil
}

// localControl is the client's side of worker.Control: each call goes to
// a node, which answers it on the leader.
type localControl struct{ h localHost }

var _ worker.Control = localControl{}

func (c localControl) Lease(ctx context.Context, req api.LeaseRequest) (api.LeaseResponse, error) {
	var resp api.LeaseResponse
	err := c.h.call(ctx, api.MethodLease, req, &resp)
	return resp, err
}

func (c localControl) Finish(ctx context.Context, req api.FinishRequest) error {
	return c.h.call(ctx, api.MethodFinish, req, nil)
}

func (c localControl) Produce(ctx context.Context, req api.ProduceRequest) error {
	return c.h.call(ctx, api.MethodProduce, req, nil)
}

func (c localControl) HandBack(ctx context.Context, req api.HandBackRequest) error {
	return c.h.call(ctx, api.MethodHandBack, req, nil)
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
	w.lp.FlushProduced()
	req := api.OffloadRequest{Job: w.cfg.job, Consumer: w.cfg.consumer, Retire: true, Remote: "on"}
	// Not assigned: the consumer, and with it the worker, is gone.
	if err := w.callRetrying(ctx, "retire", api.MethodOffload, req, nil); err != nil && !errors.Is(err, api.ErrNotAssigned) {
		return fmt.Errorf("local worker: retire: %w", err)
	}
	w.ledger.fence(w.name)
	w.retired.Store(true)
	w.gate.Busy(false)
	return nil
}

// run produces until every split is produced, a failure, or ctx's end.
func (w *localWorker) run(ctx context.Context) error {
	lctx, lcancel := context.WithCancel(ctx)
	w.lp = worker.NewLeaser(lctx, localControl{w.h}, worker.LeaseConfig{
		Job: w.cfg.job, JobID: w.cfg.jobID, Worker: w.name, Splits: w.all, Exact: w.cfg.exact,
		LeaseSplits: w.cfg.leaseSplits, LeaseDuration: localLeaseDuration,
		Poll: w.cfg.poll, ProduceInterval: max(w.cfg.poll, worker.DefaultProduceInterval), RequestTimeout: 5 * time.Second,
		Stop: w.retireCtx, Gate: w.gate, WholePipeline: true, RunsCensus: true, Waited: w.blocked, Log: w.h.logger(),
	})
	defer func() {
		lcancel() // a lease asked ahead that is still retrying
		w.lp.Close(context.Background())
	}()
	defer w.gate.Busy(false)
	for {
		// One pipeline per phase: a census (at-most-once with a loss
		// count: a dead worker's unfinished splits run once more to
		// count what they lose, delivering nothing) runs in a phase of
		// its own.
		census := w.lp.NextCensus()
		w.lp.StartPhase(0, census)
		if census {
			w.h.logger().Info("at-most-once: the local worker counts what a dead worker's splits lose (a census: run, not delivered)", "job", w.cfg.job, "splits", w.lp.QueuedCensus())
		}
		if err := w.pump(ctx); err != nil {
			return err
		}
		if w.lp.TakeRecut() {
			continue // the next split is of the other kind
		}
		if w.lp.Over() || !w.cfg.exact || w.retired.Load() {
			return nil
		}
		// A phase ended (the leases said done): the pipeline was closed so
		// its last partial batch went out; now wait for a dead worker's
		// splits to read again, or the end.
		t0 := time.Now()
		more, err := w.lp.AwaitMore(ctx) // no work: not counted against its capacity
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

// pump runs one pipeline over the lease loop's splits to its end.
// Exactly-once, a batch reaches the trainer only once the cluster has its
// receipt (write-ahead): were this process to die, what its trainer got
// is then excluded when the nodes read the worker's splits again, and
// nothing else is. Up to localAhead batches (localAheadBytes) wait for
// their receipts at once, so the pipeline does not wait a commit per
// batch, and one report carries the receipts of many (ledger.recordLocal):
// the nodes commit a Raft command per report, not per local batch.
func (w *localWorker) pump(ctx context.Context) (err error) {
	it, err := pipeline.OpenWithOptions(ctx, capParallelism(w.cfg.spec, w.cfg.cores), nil,
		pipeline.Options{Provider: w.lp, Track: w.cfg.exact, Cores: func() float64 { return w.cfg.cores }})
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
	var waiting aheadBytes
	waiting.init()
	go func() { putErr <- w.putAcked(pctx, ahead, &waiting) }()
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
				w.lp.Produced(tr.Completed())
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
		if w.lp.Census() {
			// A census delivers nothing: it counts what the splits emit
			// (reported as produced, counted lost).
			if tr != nil {
				w.lp.Produced(tr.Completed())
			}
			continue
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
				if dup, a.report = w.ledger.recordLocal(a.x.prov, a.x.size); dup {
					w.h.logger().Error("exactly-once: the local worker made a batch received before (a bug: please report it)", "job", w.cfg.job)
					continue
				}
			}
			w.lp.Produced(tr.Completed())
		}
		if err := waiting.take(pctx, a.x.size); err != nil {
			return nil // pctx ended: the putting goroutine failed, or ctx ended
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

// localAhead and localAheadBytes bound the local worker's batches waiting
// for their receipts' commit (beyond the first batch, which always goes).
const (
	localAhead      = 32
	localAheadBytes = 32 << 20
)

// aheadBytes bounds the bytes of the batches that wait for their
// receipts: take waits until what waits is under localAheadBytes (or
// nothing waits), give frees a batch's bytes once it is put.
type aheadBytes struct {
	mu    sync.Mutex
	n     int64
	freed chan struct{} // capacity 1: something was given back
}

func (a *aheadBytes) init() { a.freed = make(chan struct{}, 1) }

func (a *aheadBytes) take(ctx context.Context, size int64) error {
	for {
		a.mu.Lock()
		if a.n == 0 || a.n+size <= localAheadBytes {
			a.n += size
			a.mu.Unlock()
			return nil
		}
		a.mu.Unlock()
		select {
		case <-a.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (a *aheadBytes) give(size int64) {
	a.mu.Lock()
	a.n -= size
	a.mu.Unlock()
	select {
	case a.freed <- struct{}{}:
	default:
	}
}

// acked is a local batch and the report that carries its receipt (0:
// none, at-most-once).
type acked struct {
	x      item
	report uint64
}

// putAcked puts each batch once its receipt is committed, in order,
// until in is closed; on a failure it cancels nothing itself (pump's ctx
// ends with it) and drains in.
func (w *localWorker) putAcked(ctx context.Context, in <-chan acked, waiting *aheadBytes) error {
	var err error
	for a := range in {
		if err != nil {
			waiting.give(a.x.size)
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
		waiting.give(a.x.size)
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// callRetrying calls method until it succeeds, fails for good
// (worker.Retriable), or ctx ends, waiting a little longer after each
// failure (up to a second).
func (w *localWorker) callRetrying(ctx context.Context, what, method string, req, resp any) error {
	for attempt := 1; ; attempt++ {
		err := w.h.call(ctx, method, req, resp)
		if err == nil || !worker.Retriable(err) || ctx.Err() != nil {
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
