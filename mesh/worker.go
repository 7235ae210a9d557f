package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/tensor"
	"github.com/feedmesh/feedmesh/share"
	"github.com/feedmesh/feedmesh/splits"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// WorkerConfig bounds what a node does as a worker.
type WorkerConfig struct {
	// SendPadded ships padded tensors as they are. By default a tensor with
	// a "<name>_length" companion (padded_batch, bucket_by_sequence_length)
	// travels as its rows' valid prefixes, integer token ids in the fewest
	// bytes that hold them, and the client pads (and widens) it back: the
	// same batch, fewer bytes (batch.ShippedEncodeOptions).
	SendPadded bool
	// Disabled keeps the node out of every job: it serves control and Raft
	// only, like a dedicated Consul server.
	Disabled bool
	// TaskBuffer is how many encoded batches a task keeps ready ahead of
	// its consumers. It bounds a task's memory together with the client's
	// window: a client that never grants credit stops the task here.
	TaskBuffer int
	// LeaseSplits is the most splits a DYNAMIC task asks for per lease (the
	// leader hands out fewer near the end of an epoch, for balance).
	LeaseSplits int
	// LeaseDuration is how much work a DYNAMIC task aims to lease at once:
	// it asks for as many splits as it reads in this time (at most
	// LeaseSplits), so cheap pipelines do not pay a Raft commit every few
	// milliseconds. Longer means fewer commits, and more splits lost when
	// a worker dies (at-most-once).
	LeaseDuration time.Duration
	// MaxWindow caps the credit a client may grant on one stream.
	MaxWindow int
	// SendCoalesce is the most ready batches a stream writes at once (no
	// more than the client has credit for): small batches then share one
	// quic-go stream write instead of paying one each. It bounds the
	// batches a consumer's stream has taken from its task but not yet
	// written, which are lost with the consumer if it dies (at-most-once,
	// like the task's buffer). 1 writes batch by batch. Default 16.
	SendCoalesce int
	// JobPollInterval is how often a task checks that its job still exists
	// while it has nothing to do (no consumer reading, or finished).
	JobPollInterval time.Duration
	// ShareWindowBytes bounds each ephemeral-sharing window on this worker
	// (one per dataset that jobs with Share read at once; the issue's
	// share.window_bytes): the bytes of encoded batches kept for sharing
	// jobs that lag behind the fastest. A job more than this far behind
	// misses batches instead of slowing the others; a single batch larger
	// than this fails the shared production with an error that says so.
	// Default 256 MiB (share.DefaultWindowBytes); the fast preset 32 MiB.
	// The bound counts batches as encoded: a batch sent compressed to some
	// of the jobs (api.JobOptions.Compression) also keeps its compressed copy,
	// at most its own size again per compression in use.
	ShareWindowBytes int64
	// RoundsAhead (coordinated jobs) is how many complete round windows
	// (m batches each) a task prepares ahead of the consumers' requests.
	// 0 means DefaultRoundsAhead.
	RoundsAhead int
	// RoundsHeld (coordinated jobs) bounds the rounds a task keeps assigned
	// while some of their m batches are not yet taken (a consumer that died
	// never takes its batch). Past it the oldest round is dropped; a late
	// request for it is told to skip the round. It must exceed how far the
	// fastest consumer of a job runs ahead of the slowest: up to twice the
	// client's PrefetchBatches when the consumers step together (a rank
	// that stalls longer loses rounds, at most once each). 0 means
	// DefaultRoundsHeld.
	RoundsHeld int
}

// worker runs this node's tasks and serves their batches.
type worker struct {
	n  *Node
	wg sync.WaitGroup

	mu     sync.Mutex
	tasks  map[string]*task
	shares map[shareKey]*sharedProd // productions new sharing jobs join
	prods  map[*sharedProd]bool     // every live production, joinable or not

	// Counters of the batches this worker encoded, over all tasks and
	// shared productions: the preprocessing work it did.
	encodedBatches, encodedRows atomic.Int64
	shareProduced               atomic.Int64
}

func newWorker(n *Node) *worker {
	return &worker{n: n, tasks: map[string]*task{}, shares: map[shareKey]*sharedProd{}, prods: map[*sharedProd]bool{}}
}

// countEncoded records one encoded batch of el in the work counters.
func (w *worker) countEncoded(el pipeline.Element) {
	w.encodedBatches.Add(1)
	rows := int64(1)
	if len(el.Tensors) > 0 && len(el.Tensors[0].Shape) > 0 {
		rows = el.Tensors[0].Shape[0]
	}
	w.encodedRows.Add(rows)
}

// serve accepts data streams until l closes.
func (w *worker) serve(l net.Listener) {
	defer w.wg.Done()
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		w.wg.Add(1)
		go w.handleStream(conn)
	}
}

func (w *worker) handleStream(conn net.Conn) {
	defer w.wg.Done()
	ctx := w.n.ctx
	// The task is looked up (and started) before the client is told the
	// compression in force: the job's options decide it, not the client.
	var (
		t    *task
		terr error
	)
	sender, req, err := batch.AcceptWith(ctx, w.n.codec, conn, w.n.cfg.Worker.MaxWindow, func(req batch.OpenRequest) batch.Compression {
		if w.n.cfg.Worker.Disabled {
			return batch.CompressNone
		}
		if t, terr = w.task(ctx, req.Job); terr != nil {
			return batch.CompressNone
		}
		return t.compression()
	})
	if err != nil {
		w.n.log.Debug("data stream rejected", "err", err)
		conn.Close()
		return
	}
	defer sender.Close()
	if w.n.cfg.Worker.Disabled {
		sender.End(fmt.Errorf("node %s does not run tasks (worker disabled)", w.n.name))
		return
	}
	if err := terr; err != nil {
		if ctx.Err() != nil {
			// The node is closing: not the job's failure. Close the
			// stream without an error so the consumer retries elsewhere.
			return
		}
		sender.End(err)
		return
	}
	if t.rounds != nil {
		t.serveRound(ctx, sender, req.Extra)
		return
	}
	t.serve(ctx, sender)
}

// task returns the running task for job, starting it on first use.
func (w *worker) task(ctx context.Context, job string) (*task, error) {
	w.mu.Lock()
	t := w.tasks[job]
	w.mu.Unlock()
	if t != nil {
		return t, nil
	}
	rctx, cancel := context.WithTimeout(ctx, w.n.cfg.RequestTimeout)
	resp, err := w.n.jobGet(rctx, api.JobRequest{Job: job})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("worker %s could not load job %q (is the control plane reachable, does the job exist?): %w", w.n.name, job, err)
	}
	spec, err := pipeline.DecodeCanonical(resp.Spec)
	if err != nil {
		return nil, fmt.Errorf("dataset spec: %w", err)
	}
	all, err := pipeline.Splits(spec)
	if err != nil {
		return nil, fmt.Errorf("enumerate splits: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.tasks[job]; t != nil {
		return t, nil
	}
	if w.n.ctx.Err() != nil {
		return nil, errors.New("worker is shutting down")
	}
	t = &task{w: w, job: resp.Job, spec: spec, splits: all,
		out: make(chan *batch.Frame, w.n.cfg.Worker.TaskBuffer), finished: make(chan struct{}), done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(w.n.ctx)
	if resp.Job.Options.Coordinated {
		rs, err := newRoundServer(w.n.cfg.Worker, resp.Job, spec)
		if err != nil {
			t.cancel()
			return nil, err
		}
		t.rounds = rs
	}
	if resp.Job.Options.Share {
		sp, err := w.joinShareLocked(resp.Job, spec, all)
		if err != nil {
			t.cancel()
			return nil, err
		}
		t.share = sp
	}
	w.tasks[job] = t
	w.wg.Add(1)
	go t.run()
	w.n.log.Info("task started", "job", job, "sharding", resp.Job.Options.Sharding, "splits", len(all))
	return t, nil
}

func (w *worker) remove(t *task) {
	w.mu.Lock()
	if w.tasks[t.job.Name] == t {
		delete(w.tasks, t.job.Name)
	}
	w.mu.Unlock()
}

// close stops every task and waits for them and the stream handlers.
func (w *worker) close() {
	w.mu.Lock()
	for _, t := range w.tasks {
		t.cancel()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// task runs one job's pipeline on this worker and hands its batches to the
// job's consumers: each batch goes to exactly one consumer stream.
type task struct {
	w      *worker
	job    api.JobInfo
	spec   *pipeline.Spec
	splits []pipeline.Split

	ctx      context.Context
	cancel   context.CancelFunc
	out      chan *batch.Frame // closed when production ends; err says how
	finished chan struct{}     // closed when production ends
	done     chan struct{}     // closed when run returns
	err      error             // set before out is closed

	seq      atomic.Uint64
	produced atomic.Int64

	// share is the shared production the task reads (jobs with Share),
	// nil otherwise; shareFinal keeps the job's counters once it left.
	share      *sharedProd
	shareFinal share.JobStats
	shareLeft  bool

	// rounds (coordinated jobs) hands out round windows; nil otherwise.
	rounds *roundServer
}

// compression is the job's compression (api.JobOptions.Compression); none
// when this node does not know the name (a newer node's).
func (t *task) compression() batch.Compression {
	c, err := batch.ParseCompression(t.job.Options.Compression)
	if err != nil {
		return batch.CompressNone
	}
	return c
}

func (t *task) run() {
	defer t.w.wg.Done()
	defer close(t.done)
	defer t.w.remove(t)
	switch {
	case t.rounds != nil:
		t.err = t.produceWindows()
	case t.share != nil:
		t.err = t.readShared()
	default:
		t.err = t.produce()
	}
	close(t.out)
	close(t.finished)
	if t.err != nil && t.ctx.Err() == nil {
		t.w.n.log.Warn("task failed", "job", t.job.Name, "err", t.err)
	}
	// Stay around, finished, so consumers that connect later get the end
	// of data at once, until the job is garbage-collected.
	t.waitForJobGone()
}

// produce runs the pipeline over this worker's splits for every epoch.
func (t *task) produce() error {
	o := t.job.Options
	switch o.Sharding {
	case api.Dynamic:
		p := newLeaseProvider(t.ctx, t.w.n, t.job.Name, t.splits)
		err := t.pump(pipeline.Options{Provider: p}, nil, -1)
		p.close()
		return err
	case api.Static:
		ids := splits.StaticAssignment(int64(len(t.splits)), workerNames(t.job), t.w.n.name)
		mine := make([]pipeline.Split, 0, len(ids))
		for _, id := range ids {
			s, err := splitByID(t.splits, id)
			if err != nil {
				return err
			}
			mine = append(mine, s)
		}
		for e := int64(0); e < o.Epochs; e++ {
			if err := t.pump(pipeline.Options{}, mine, e); err != nil {
				return err
			}
		}
		return nil
	default: // off: the whole dataset on every worker
		for e := int64(0); e < o.Epochs; e++ {
			if err := t.pump(pipeline.Options{}, t.splits, e); err != nil {
				return err
			}
		}
		return nil
	}
}

// pump runs one pipeline to its end, encoding each batch and queueing it.
// A full queue blocks the pipeline: that is the task's back-pressure.
func (t *task) pump(o pipeline.Options, ss []pipeline.Split, epoch int64) error {
	it, err := pipeline.OpenWithOptions(t.ctx, t.spec, ss, o)
	if err != nil {
		return err
	}
	defer it.Close()
	poll := time.NewTicker(t.w.n.cfg.Worker.JobPollInterval)
	defer poll.Stop()
	for {
		el, err := it.Next(t.ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		h := batch.Header{Seq: t.seq.Add(1) - 1, Worker: t.w.n.name, Epoch: epoch}
		f, err := t.w.n.encodeBatch(h, el)
		if err != nil {
			return fmt.Errorf("encode batch: %w", err)
		}
		t.w.countEncoded(el)
		for sent := false; !sent; {
			select {
			case t.out <- f:
				sent = true
				t.produced.Add(1)
			case <-t.ctx.Done():
				return t.ctx.Err()
			case <-poll.C:
				if t.jobGone() {
					t.cancel()
				}
			}
		}
	}
}

// serve streams the task's batches to one consumer until the task ends,
// the consumer goes away, or the node closes.
func (t *task) serve(ctx context.Context, s *batch.Sender) {
	fs := make([]*batch.Frame, 0, t.w.n.cfg.Worker.SendCoalesce)
	for {
		select {
		case f, ok := <-t.out:
			if !ok {
				t.end(s)
				return
			}
			// Take the batches already waiting, as many as the client has
			// credit for, and write them together.
			fs = append(fs[:0], f)
			open := t.gather(&fs, min(s.Available(), t.w.n.cfg.Worker.SendCoalesce))
			_, err := s.SendAll(ctx, fs)
			clear(fs) // do not keep sent batches alive while waiting for the next
			if err != nil {
				// The consumer is gone; these batches (up to SendCoalesce,
				// the unsent ones included) are lost with it (at-most-once),
				// as tf.data service does.
				t.w.n.log.Debug("consumer stream ended", "job", t.job.Name, "err", err)
				return
			}
			if !open {
				t.end(s)
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// gather appends to *fs the batches waiting in the task's buffer, without
// blocking, until *fs holds max; false once the buffer is closed.
func (t *task) gather(fs *[]*batch.Frame, max int) bool {
	for len(*fs) < max {
		select {
		case f, ok := <-t.out:
			if !ok {
				return false
			}
			*fs = append(*fs, f)
		default:
			return true
		}
	}
	return true
}

// end ends a consumer's stream once the task's buffer is closed and empty.
func (t *task) end(s *batch.Sender) {
	if t.ctx.Err() != nil {
		// Cancelled (node closing, job collected), not failed: no End, so
		// the client reconnects or moves on instead of failing the job
		// with "context canceled".
		return
	}
	s.End(t.err)
}

func (t *task) jobGone() bool {
	ctx, cancel := context.WithTimeout(t.ctx, t.w.n.cfg.RequestTimeout)
	defer cancel()
	resp, err := t.w.n.jobGet(ctx, api.JobRequest{Job: t.job.Name})
	// A job of the same name created since (a new ID) is another job: this
	// task, with the old spec and options, must not serve it.
	return errors.Is(err, transport.ErrNotFound) || (err == nil && resp.Job.ID != t.job.ID)
}

func (t *task) waitForJobGone() {
	poll := time.NewTicker(t.w.n.cfg.Worker.JobPollInterval)
	defer poll.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-poll.C:
			if t.jobGone() {
				t.w.n.log.Info("task stopped: job garbage-collected", "job", t.job.Name)
				return
			}
		}
	}
}

// workerNames are the names of a job's workers, in its order (a STATIC
// job's agreed list).
func workerNames(j api.JobInfo) []string {
	out := make([]string, len(j.Workers))
	for i, w := range j.Workers {
		out[i] = w.Name
	}
	return out
}

// splitByID returns the split with the given id: ids are positions in the
// deterministic enumeration every node computes.
func splitByID(all []pipeline.Split, id int64) (pipeline.Split, error) {
	if id < 0 || id >= int64(len(all)) || all[id].ID != id {
		return pipeline.Split{}, fmt.Errorf("split %d does not exist in this worker's view of the dataset (%d splits): do all nodes see the same files?", id, len(all))
	}
	return all[id], nil
}

// leaseProvider feeds a DYNAMIC task's pipeline with splits leased through
// Raft, many per lease. It asks for the next lease in the background while
// the pipeline still reads the current one, so a Raft round trip (an fsync
// on a quorum) does not stall the pipeline; and it reports the splits it
// has read completely along with that request.
type leaseProvider struct {
	ctx    context.Context
	n      *Node
	job    string // the lease identity: the job, or its share group
	splits []pipeline.Split

	queue   []leasedSplit
	current leasedSplit
	started bool
	done    bool   // the last lease said no more will come
	reqID   uint64 // of the last lease asked for

	finished []leasedSplit // read completely, not yet reported
	inflight bool
	ready    chan leaseResult // capacity 1: the background lease's answer
	wg       sync.WaitGroup

	// Moving averages that decide when to ask ahead: the time a lease
	// takes to come back, and the time the pipeline spends on one split.
	leaseTime, splitTime time.Duration
	lastNext, askedAt    time.Time
}

type leasedSplit struct{ id, epoch int64 }

type leaseResult struct {
	resp api.LeaseResponse
	err  error
}

// newLeaseProvider leases splits of all under job's name (a job, or a
// share group) for this node, until ctx ends.
func newLeaseProvider(ctx context.Context, n *Node, job string, all []pipeline.Split) *leaseProvider {
	// Request ids start from the clock, not 1: a provider created again for
	// the same (job, worker), as a shared production is after its jobs all
	// left, must not have its first lease taken for a retry of the last.
	return &leaseProvider{ctx: ctx, n: n, job: job, splits: all, ready: make(chan leaseResult, 1),
		reqID: uint64(time.Now().UnixNano())}
}

// Next implements pipeline.SplitProvider. Being asked for the next split
// means the pipeline's source has read the previous one completely.
func (p *leaseProvider) Next(ctx context.Context) (pipeline.Split, error) {
	now := time.Now()
	if p.started {
		p.finished = append(p.finished, p.current)
		p.started = false
		p.splitTime = ewma(p.splitTime, now.Sub(p.lastNext))
	}
	p.lastNext = now
	// Ask ahead while the splits queued still cover twice the time a lease
	// takes to come back, so the pipeline never waits on Raft.
	if !p.done && !p.inflight && time.Duration(len(p.queue))*p.splitTime <= 2*p.leaseTime {
		p.askAsync()
	}
	for len(p.queue) == 0 {
		if p.done && !p.inflight {
			return pipeline.Split{}, io.EOF
		}
		if !p.inflight {
			p.askAsync()
		}
		select {
		case r := <-p.ready:
			p.inflight = false
			p.leaseTime = ewma(p.leaseTime, time.Since(p.askedAt))
			if errors.Is(r.err, api.ErrNotAssigned) {
				// Expired while alive (a gossip blip): the job counts this
				// worker's leases as lost and goes on without it, so this
				// worker's part ends here, cleanly, not as a job failure.
				p.n.log.Warn("worker expired from the job while running; ending its part", "job", p.job)
				p.done, p.queue = true, nil
				return pipeline.Split{}, io.EOF
			}
			if r.err != nil {
				return pipeline.Split{}, fmt.Errorf("lease splits: %w", r.err)
			}
			for _, id := range r.resp.Splits {
				p.queue = append(p.queue, leasedSplit{id: id, epoch: r.resp.Epoch})
			}
			p.done = r.resp.Done
		case <-ctx.Done():
			return pipeline.Split{}, ctx.Err()
		}
	}
	ls := p.queue[0]
	p.queue = p.queue[1:]
	s, err := splitByID(p.splits, ls.id)
	if err != nil {
		return pipeline.Split{}, err
	}
	p.current, p.started = ls, true
	return s, nil
}

// askAsync reports the finished splits and asks for the next lease in a
// goroutine that the task waits for (close).
func (p *leaseProvider) askAsync() {
	p.inflight = true
	p.askedAt = time.Now()
	p.reqID++
	finished := p.finished
	p.finished = nil
	req := api.LeaseRequest{Job: p.job, Worker: p.n.name, RequestID: p.reqID, N: p.leaseSize()}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		resp, err := p.n.lease(p.ctx, req)
		p.ready <- leaseResult{resp: resp, err: err}
	}()
	if len(finished) > 0 {
		// The report is not on the lease's critical path.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.report(p.ctx, finished)
		}()
	}
}

// leaseSize asks for LeaseDuration's worth of splits at the rate the
// pipeline reads them; 4 before the rate is known, so the first leases
// spread the start of a job over the workers.
func (p *leaseProvider) leaseSize() int {
	cfg := p.n.cfg.Worker
	if p.splitTime <= 0 {
		return min(4, cfg.LeaseSplits)
	}
	return int(max(1, min(int64(cfg.LeaseSplits), int64(cfg.LeaseDuration/p.splitTime))))
}

// ewma folds sample into a moving average (the first sample sets it).
func ewma(avg, sample time.Duration) time.Duration {
	if avg == 0 {
		return sample
	}
	return (3*avg + sample) / 4
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
	p.wg.Wait()
	if p.started {
		p.finished = append(p.finished, p.current)
		p.started = false
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

// TaskStats describes one task running on this node.
type TaskStats struct {
	Job string
	// Produced counts batches the task encoded and queued.
	Produced int64
	// Queued is how many of them wait for a consumer.
	Queued int
	// Finished: the task's pipeline has ended.
	Finished bool
}

// Tasks lists the tasks running on this node.
func (n *Node) Tasks() []TaskStats {
	n.worker.mu.Lock()
	defer n.worker.mu.Unlock()
	out := make([]TaskStats, 0, len(n.worker.tasks))
	for _, t := range n.worker.tasks {
		st := TaskStats{Job: t.job.Name, Produced: t.produced.Load(), Queued: len(t.out)}
		select {
		case <-t.finished:
			st.Finished = true
		default:
		}
		out = append(out, st)
	}
	return out
}

// encodeBatch encodes one batch for the wire, unpadded and narrowed unless
// configured otherwise.
func (n *Node) encodeBatch(h batch.Header, el tensor.Element) (*batch.Frame, error) {
	o := batch.ShippedEncodeOptions
	if n.cfg.Worker.SendPadded {
		o = batch.EncodeOptions{}
	}
	return batch.EncodeWith(n.codec, h, el, o)
}
