package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// The Iterator is the skeleton both ways of reading a job share: it owns
// the iteration's context, the heartbeat loop (heartbeat.go), the buffer
// Next reads with its byte budget, the stream helper (streams.go), the
// retry policy (retry.go), the statistics, and the end: the first error,
// or io.EOF, ends the iteration, and Close waits for every goroutine it
// started. An engine does what differs: the plain engine (plain.go) reads
// every worker's streams, the coordinated one (coordinated.go) reads round
// by round.

// engine reads a job's batches into its Iterator.
type engine interface {
	// beat is the request of the next heartbeat. Called from the
	// heartbeat loop's goroutine.
	beat() api.JobRequest
	// run reads until the end of data (io.EOF), a failure (its error), or
	// ctx's end, taking each heartbeat's answer from beats (the newest
	// replaces one not yet read). It returns once every goroutine it
	// started has returned.
	run(ctx context.Context, beats <-chan api.JobInfo) error
}

// host is what an engine may ask of its Iterator: engines keep their own
// state and reach the Iterator's only through these methods.
type host interface {
	openStream(ctx context.Context, worker, addr string, sr streamRequest) (*stream, error)
	// put hands a batch to Next once the prefetch budget has room for it.
	put(ctx context.Context, x item) error
	// queue is the buffer Next reads, for an engine that must wait on
	// more than room in it; batches sent there bypass the byte budget.
	queue() chan<- item
	workerAddr(name string) string
	// fail ends the iteration with err (the first error wins).
	fail(err error)
	kickHeartbeat()
	countReconnect()
	countDropped()
	countRound(k roundCount)
	logger() *slog.Logger
}

// item is a batch on its way to Next.
type item struct {
	b    Batch
	prov []batch.ProvRange // exactly-once: the batch's elements (a copy)
	size int64
	wire int64 // bytes on the stream
	held int64 // bytes of the prefetch budget it holds
	cut  int   // a node's element cut after this many ops (api.CutHeader); 0: a whole batch
}

// Iterator yields a job's batches from all its workers. Next is not safe
// for concurrent use; Stats and Close may be called from any goroutine.
type Iterator struct {
	c        *Client
	job      string
	consumer string
	index    int    // coordinated jobs: the consumer's index
	jobID    uint64 // the job's ID: a job resumed under the same name is another
	// capability is the consumer's (api.Capability), as its attach
	// answered it: its streams carry it, its checkpoints' MACs are keyed
	// by it. A secret: never logged.
	capability []byte
	comp       batch.Compression // the job's, asked of every worker
	eng        engine
	ledger     *ledger                // exactly-once jobs: what this consumer received (receipts.go)
	track      *tracker               // exactly-once jobs: what reached the trainer (checkpoint.go)
	off        *offloadRun            // where the pipeline runs (offload.go); nil for Attach
	decided    atomic.Bool            // the offload and workers decision was logged (logDecision)
	cut        atomic.Pointer[cutRun] // a partial offload's suffix (cut.go); nil without a cut
	ord        *orderedRun            // a deterministic job's reorder buffer (ordered.go); nil otherwise

	ctx    context.Context
	cancel context.CancelFunc
	items  chan item
	budget *transport.ByteBudget // Options.PrefetchBytes
	kick   chan struct{}         // heartbeat now
	wg     sync.WaitGroup

	mu    sync.Mutex
	stall stallMeter  // guarded by mu
	info  api.JobInfo // as last heard
	stats Stats
	err   error // terminal error, or io.EOF once the job ended

	closeOnce sync.Once
	// final: the job's state at the end of data is in (refreshInfo);
	// a heartbeat answered before it must not replace it.
	final bool
	// saidFewSplits: the few-splits warning (fewSplits) was logged.
	saidFewSplits bool
	// lastHeard: when the cluster last answered a heartbeat or sent a
	// batch (Unix ns); unreachable: the iteration ended because it had
	// not for Options.UnavailableTimeout (Close then asks nothing of it).
	lastHeard   atomic.Int64
	unreachable atomic.Bool
}

func newIterator(c *Client, info api.JobInfo, consumer string, batched bool, index int, from *checkpoint, off *offloadRun, ord *orderedRun) *Iterator {
	it := &Iterator{
		c: c, job: info.Name, jobID: info.ID, consumer: consumer, index: index, info: info, capability: info.Capability, ord: ord,
		items:  make(chan item, c.opts.PrefetchBatches),
		budget: transport.NewByteBudget("PrefetchBytes", c.opts.PrefetchBytes),
		kick:   make(chan struct{}, 1),
		stats:  Stats{Workers: map[string]WorkerStats{}},
		off:    off,
	}
	it.heard()
	info.Capability = nil // kept in it.capability only
	it.setInfo(info)
	// A compression this client does not know (a newer cluster's) is
	// not asked for: the batches come uncompressed.
	it.comp, _ = batch.ParseCompression(info.Options.Compression)
	it.ctx, it.cancel = context.WithCancel(context.Background())
	if info.Tracks() {
		it.track = newTracker(from)
		it.ledger = newLedger(it.track)
		if it.track.beat(info, consumer) {
			it.warnResumeWaiting(info.Exact) // at once, before Distribute returns
		}
	}
	if from != nil && c.opts.ResumeWait > 0 {
		it.wg.Add(1)
		go func() {
			defer it.wg.Done()
			it.waitResumed(c.opts.ResumeWait)
		}()
	}
	if off != nil && off.cut > 0 {
		if err := it.openCut(off.spec, off.cut); err != nil {
			it.fail(fmt.Errorf("offload_boundary %d: %w", off.cut, err))
		} else {
			// `feedmesh jobs` shows the cut, as it shows a local worker,
			// and the rate measured since the start.
			off.since = time.Now()
			it.wg.Add(1)
			go func() {
				defer it.wg.Done()
				it.reportOffload(it.ctx)
			}()
		}
	}
	if info.Options.Coordinated {
		it.eng = newCoordinator(it, info, consumer, c.opts, batched, index, it.ledger)
	} else {
		p := newPlain(it, info, consumer, c.opts, batched, it.ledger)
		it.eng = p
		it.startLocal(p)
	}
	if off == nil || off.local == nil {
		it.logDecision() // no local worker: decided (a local one logs it: startLocal, auto)
	}
	it.wg.Add(1)
	go it.run()
	if it.ledger != nil {
		r := &reporter{l: it.ledger, job: it.job, consumer: consumer, interval: c.opts.ReceiptInterval,
			send: func(ctx context.Context, req api.ReceiptsRequest) error {
				return it.c.call(ctx, api.MethodReceipts, req, nil)
			},
			onErr: func(err error) { it.logger().Warn("exactly-once receipts; will resend", "job", it.job, "err", err) },
		}
		it.wg.Add(1)
		go func() {
			defer it.wg.Done()
			r.run(it.ctx, it.exitTimeout)
		}()
	}
	if info.Options.Share && !info.Options.Coordinated {
		it.wg.Add(1)
		go it.refreshShareStats()
	}
	return it
}

// run owns the iteration: it runs the heartbeat loop beside the engine,
// and once the engine has returned, stops the heartbeats and closes the
// buffer, so that Next returns the error that ended the iteration after
// the batches already buffered.
func (it *Iterator) run() {
	defer it.wg.Done()
	beats := make(chan api.JobInfo, 1)
	var beater sync.WaitGroup
	// Heartbeats run on their own goroutine: during a control-plane outage
	// each may block for RequestTimeout, and the data side (reopening
	// streams, noticing the end of data) must not wait for them.
	beater.Add(1)
	go func() {
		defer beater.Done()
		it.heartbeat(beats)
	}()
	err := it.eng.run(it.ctx, beats)
	if err == nil || errors.Is(err, io.EOF) { // the end of data (plain says io.EOF, coordinated nil)
		it.refreshInfo()
		err = io.EOF
	}
	it.fail(err)
	beater.Wait()
	close(it.items)
}

// Job is the job's name.
func (it *Iterator) Job() string { return it.job }

// Next returns the next batch, io.EOF once every worker has finished the
// job's last epoch, or the error that ended the job (a worker's pipeline
// failure names the worker and the split).
func (it *Iterator) Next(ctx context.Context) (Batch, error) {
	if r := it.cut.Load(); r != nil {
		return it.nextCut(ctx, r)
	}
	if it.ord != nil {
		return it.nextOrdered(ctx, it.ord)
	}
	entered, queued := time.Now(), len(it.items)
	select {
	case x, ok := <-it.items:
		if !ok {
			if r := it.cut.Load(); r != nil {
				// Cut while this call waited, and the suffix has
				// emptied the buffer since: what it holds comes first.
				return it.nextCut(ctx, r)
			}
			it.mu.Lock()
			defer it.mu.Unlock()
			return Batch{}, it.err
		}
		if x.cut != 0 {
			// The job was cut while this call waited (cutMidJob opens
			// the suffix before it asks the cluster to cut).
			r := it.cut.Load()
			if r == nil {
				it.budget.Release(x.held)
				err := fmt.Errorf("worker %s sent an element cut after %d ops, and this consumer runs no suffix (the job was cut by another consumer?)", x.b.Worker, x.cut)
				it.fail(err)
				return Batch{}, err
			}
			r.pending <- x
			return it.nextCut(ctx, r)
		}
		it.budget.Release(x.held)
		it.countDelivered(x, entered, queued)
		if it.track != nil {
			it.track.returned(x.prov)
		}
		return x.b, nil
	case <-ctx.Done():
		return Batch{}, ctx.Err()
	}
}

// All ranges over the batches; it stops at the end of data, or after
// yielding the error that ended the iteration.
func (it *Iterator) All(ctx context.Context) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		for {
			b, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(b, err) || err != nil {
				return
			}
		}
	}
}

// Close stops the iterator's streams and detaches it from the job.
func (it *Iterator) Close() error {
	var err error
	it.closeOnce.Do(func() {
		it.fail(context.Canceled)
		it.wg.Wait()
		it.closeCut()
		timeout := it.exitTimeout()
		if timeout <= 0 {
			it.logger().Info("closing without a detach: the cluster did not answer for Options.UnavailableTimeout (the consumer stays attached until its lease expires, or a resume fences it)", "job", it.job)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = it.c.call(ctx, api.MethodDetach, api.JobRequest{Job: it.job, Consumer: it.consumer}, nil)
	})
	return err
}

// exitTimeout bounds each of what the end of an iteration asks of the
// cluster (the last receipt report, the detach): RequestTimeout, or 0 (ask
// nothing) once the iteration ended because the cluster did not answer.
func (it *Iterator) exitTimeout() time.Duration {
	if it.unreachable.Load() {
		return 0
	}
	return it.c.opts.RequestTimeout
}

// Workers lists the job's workers as last heard.
func (it *Iterator) Workers() []api.WorkerInfo {
	it.mu.Lock()
	defer it.mu.Unlock()
	out := append([]api.WorkerInfo(nil), it.info.Workers...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// fail ends the iteration with err unless it has already ended, and
// cancels everything the iteration runs.
func (it *Iterator) fail(err error) {
	it.mu.Lock()
	if it.err == nil {
		it.err = err
	}
	it.mu.Unlock()
	it.cancel()
}

func (it *Iterator) put(ctx context.Context, x item) error {
	if r := it.ord; r != nil {
		if err := it.gateOrdered(ctx, r, x); err != nil {
			return err
		}
	}
	// A batch larger than the whole budget takes all of it, alone, rather
	// than waiting for ever.
	if g := it.offGate(); g != nil && x.b.Worker != it.off.localName() {
		if err := g.waitRemote(ctx); err != nil {
			return ctx.Err()
		}
	}
	held := min(x.size, it.budget.Size())
	if err := it.budget.Acquire(ctx, held); err != nil {
		return ctx.Err()
	}
	x.held = held
	it.heard()
	if g := it.offGate(); g != nil {
		local := x.b.Worker == it.off.localName()
		g.add(local, 1)
		if local {
			it.off.meters.localRows.Add(x.b.Rows())
		} else {
			it.off.meters.remoteRows.Add(x.b.Rows())
			it.off.meters.remoteWire.Add(x.wire)
		}
	}
	select {
	case it.items <- x:
		return nil
	case <-ctx.Done():
		it.budget.Release(x.held)
		return ctx.Err()
	}
}

func (it *Iterator) queue() chan<- item { return it.items }

// workerAddr is the worker's QUIC address as last heard, or "".
func (it *Iterator) workerAddr(name string) string {
	it.mu.Lock()
	defer it.mu.Unlock()
	for _, w := range it.info.Workers {
		if w.Name == name {
			return w.Addr
		}
	}
	return ""
}

func (it *Iterator) setInfo(info api.JobInfo) { it.setInfoAs(info, false) }

// setInfoAs records info as the job's; final marks it as the state at the
// end of data, after which heartbeats (possibly answered before it) no
// longer change what Stats reports.
func (it *Iterator) setInfoAs(info api.JobInfo, final bool) {
	it.mu.Lock()
	if it.final {
		it.mu.Unlock()
		return
	}
	it.final = final
	it.info = info
	it.stats.JobState, it.stats.JobFailure = info.State, info.Failure
	it.stats.NumSplits, it.stats.SplitsLost = info.NumSplits, info.Lost
	it.stats.Delivery = info.Options.Delivery
	if info.Exact != nil {
		x := *info.Exact
		it.stats.Exact = &x
		it.stats.LossCounted, it.stats.ElementsLost = x.AtMostOnce, x.Lost
	}
	it.stats.Autocache = info.Autocache
	warn := ""
	if w := fewSplits(info); w != "" && !it.saidFewSplits {
		it.saidFewSplits, warn = true, w
	}
	it.mu.Unlock()
	if warn != "" {
		it.logger().Warn(warn, "job", it.job)
	}
	it.retireLocalIfShared(info)
	it.c.learnNodes(info.Workers)
	if it.track != nil {
		if it.track.beat(info, it.consumer) {
			it.warnResumeWaiting(info.Exact)
		}
	}
}

// refreshInfo asks for the job's state once more at the end of the data,
// so that Stats then reports the loss as it stands then, not as of the
// last heartbeat. A job that counts its loss (at-most-once, tracked) is
// asked again, its receipts sent at once, every ReceiptInterval until it
// has finished or Options.LossWait has passed, so that ElementsLost is
// final. It is best effort: on failure, Stats keeps the last.
func (it *Iterator) refreshInfo() {
	deadline := time.Now().Add(it.c.opts.LossWait)
	for {
		var resp api.JobGetResponse
		if err := it.c.call(it.ctx, api.MethodJobGet, api.JobRequest{Job: it.job}, &resp); err != nil {
			it.logger().Debug("job state at the end of data", "job", it.job, "err", err)
			return
		}
		x := resp.Job.Exact
		last := x == nil || !x.AtMostOnce || resp.Job.State != api.JobRunning || !time.Now().Before(deadline)
		it.setInfoAs(resp.Job, last)
		if last {
			if x != nil && x.AtMostOnce && resp.Job.State == api.JobRunning {
				it.logger().Info("at-most-once: the job still runs at this consumer's end of data (another consumer reads, or a dead worker's splits are being counted): its loss count may still grow", "job", it.job, "lost", x.Lost, "waited", it.c.opts.LossWait)
			}
			return
		}
		if it.ledger != nil {
			it.ledger.wake()
		}
		t := time.NewTimer(it.c.opts.ReceiptInterval)
		select {
		case <-t.C:
		case <-it.ctx.Done():
			t.Stop()
			return
		}
	}
}

func (it *Iterator) logger() *slog.Logger { return it.c.opts.Logger }
