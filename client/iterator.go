package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/pipeline/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Batch is one batch as delivered, with where it came from.
type Batch struct {
	tensor.Element
	// Worker is the node that produced the batch.
	Worker string
	// Seq is the batch's sequence number within its worker's task.
	Seq   uint64
	Epoch int64
	// Round (coordinated jobs) is the round the batch belongs to, its
	// bucket and every consumer's padded token count; nil otherwise.
	Round *api.RoundHeader

	batched bool
	buf     *recycled // the buffer the batch's tensors were read into; nil: not recyclable
}

// recycled is a batch's receive buffers (its tail, or its re-padded
// tensors) on their way back to the client's pool.
type recycled struct {
	rec  *batch.Recorder
	bufs [][]byte
	done atomic.Bool
}

// Release gives the batch's receive buffers back to the client for reuse by
// a later batch (Options.RecycleBytes). After Release the batch's tensors
// must not be used: their bytes will be overwritten. Optional: a batch never
// released is garbage-collected as usual. Calling it again, or on a copy of
// the batch, does nothing.
func (b Batch) Release() {
	if r := b.buf; r != nil && r.done.CompareAndSwap(false, true) {
		r.rec.Put(r.bufs)
		r.bufs = nil
	}
}

// receiverConfig is the receive configuration of one of the client's batch
// streams, with rec (nil when the client does not recycle buffers) as its
// allocator. growWindow lets the window grow by Options.WindowBytes.
func (c *Client) receiverConfig(rec *batch.Recorder, growWindow bool) batch.ReceiverConfig {
	rc := batch.ReceiverConfig{Limits: batch.DefaultLimits()}
	if growWindow && c.opts.WindowBytes > 0 {
		rc.WindowBytes = c.opts.WindowBytes
	}
	if rec != nil {
		rc.Alloc = rec.Alloc
	}
	return rc
}

// recorder is a new Recorder of the client's pool, or nil without one.
func (c *Client) recorder() *batch.Recorder {
	if c.pool == nil {
		return nil
	}
	return c.pool.Recorder()
}

// recyclable wraps the buffers rec recorded for the batch just received,
// for Batch.Release.
func recyclable(rec *batch.Recorder) *recycled {
	if rec == nil {
		return nil
	}
	bufs := rec.Take()
	if len(bufs) == 0 {
		return nil
	}
	return &recycled{rec: rec, bufs: bufs}
}

// Rows is the number of elements in the batch: its leading dimension,
// taken from its first tensor, or 1 when the job's spec does not batch.
func (b *Batch) Rows() int64 {
	if !b.batched || len(b.Tensors) == 0 || len(b.Tensors[0].Shape) == 0 {
		return 1
	}
	return b.Tensors[0].Shape[0]
}

// WorkerStats counts what one worker delivered.
type WorkerStats struct {
	Batches int64 `json:"batches"`
	Rows    int64 `json:"rows"`
	Bytes   int64 `json:"bytes"`
	// WireBytes is what those batches took on the network: unpadded,
	// compressed (JobOptions.Compression), headers included.
	WireBytes int64 `json:"wire_bytes"`
}

// Stats counts what the iterator delivered so far.
type Stats struct {
	Batches int64 `json:"batches"`
	Rows    int64 `json:"rows"`
	Bytes   int64 `json:"bytes"`
	// WireBytes is what the batches took on the network (see WorkerStats).
	WireBytes int64                  `json:"wire_bytes"`
	Workers   map[string]WorkerStats `json:"workers"`
	// Reconnects counts worker streams reopened after a failure.
	Reconnects int64 `json:"reconnects"`
	// Share (jobs with JobOptions.Share) are the job's sharing counters as
	// the workers last reported them: refreshed every HeartbeatInterval
	// and by ShareStats. Nil for jobs that do not share.
	Share *api.JobShareSummary `json:"share,omitempty"`
	// Rounds (coordinated jobs) counts the rounds delivered, and
	// SkippedRounds those skipped (their worker died, dropped them, or had
	// reached its end of data).
	Rounds        int64 `json:"rounds,omitempty"`
	SkippedRounds int64 `json:"skipped_rounds,omitempty"`
}

type item struct {
	b    Batch
	size int64
	wire int64 // bytes on the stream
}

// streamState is what the iterator knows of one worker's streams.
type streamState struct {
	addr    string
	running int  // streams open to the worker (up to StreamsPerWorker)
	done    bool // the worker sent its end of data on a stream
	dropped bool // the worker was expired: it will never finish
	fails   int  // consecutive failed streams; reset by a batch
	retryAt time.Time
}

// Iterator yields a job's batches from all its workers. Next is not safe
// for concurrent use; Stats and Close may be called from any goroutine.
type Iterator struct {
	c        *Client
	job      string
	consumer string
	batched  bool
	comp     batch.Compression // the job's, asked of every worker

	ctx    context.Context
	cancel context.CancelFunc
	items  chan item
	budget *byteBudget
	wake   chan struct{} // a stream ended: re-check for the end of data
	wg     sync.WaitGroup

	mu      sync.Mutex
	info    api.JobInfo
	streams map[string]*streamState
	stats   Stats
	err     error       // terminal error, or io.EOF once the job ended
	index   int         // coordinated: the consumer index
	rounds  []RoundStat // coordinated: the last rounds delivered

	closeOnce sync.Once
}

func newIterator(c *Client, info api.JobInfo, consumer string, batched bool, index int) *Iterator {
	it := &Iterator{
		c: c, job: info.Name, consumer: consumer, info: info, batched: batched,
		items:   make(chan item, c.opts.PrefetchBatches),
		budget:  newByteBudget(c.opts.PrefetchBytes),
		wake:    make(chan struct{}, 1),
		streams: map[string]*streamState{},
		stats:   Stats{Workers: map[string]WorkerStats{}},
		index:   index,
	}
	// A compression this client does not know (a newer cluster's) is
	// not asked for: the batches come uncompressed.
	it.comp, _ = batch.ParseCompression(info.Options.Compression)
	it.ctx, it.cancel = context.WithCancel(context.Background())
	it.wg.Add(1)
	if info.Options.Coordinated {
		go it.coordinate()
		return it
	}
	go it.supervise()
	if info.Options.Share {
		it.wg.Add(1)
		go it.refreshShareStats()
	}
	return it
}

// Job is the job's name.
func (it *Iterator) Job() string { return it.job }

// Next returns the next batch, io.EOF once every worker has finished the
// job's last epoch, or the error that ended the job (a worker's pipeline
// failure names the worker and the split).
func (it *Iterator) Next(ctx context.Context) (Batch, error) {
	select {
	case x, ok := <-it.items:
		if !ok {
			it.mu.Lock()
			defer it.mu.Unlock()
			return Batch{}, it.err
		}
		it.budget.release(x.size)
		it.mu.Lock()
		it.stats.Batches++
		it.stats.Rows += x.b.Rows()
		it.stats.Bytes += x.size
		it.stats.WireBytes += x.wire
		ws := it.stats.Workers[x.b.Worker]
		ws.Batches++
		ws.Rows += x.b.Rows()
		ws.Bytes += x.size
		ws.WireBytes += x.wire
		it.stats.Workers[x.b.Worker] = ws
		it.mu.Unlock()
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

// Stats returns what was delivered so far.
func (it *Iterator) Stats() Stats {
	it.mu.Lock()
	defer it.mu.Unlock()
	s := it.stats
	if it.stats.Share != nil {
		sh := *it.stats.Share
		sh.Workers = append([]api.WorkerShare(nil), sh.Workers...)
		sh.Unreachable = append([]string(nil), sh.Unreachable...)
		s.Share = &sh
	}
	s.Workers = make(map[string]WorkerStats, len(it.stats.Workers))
	for k, v := range it.stats.Workers {
		s.Workers[k] = v
	}
	return s
}

// Close stops the iterator's streams and detaches it from the job.
func (it *Iterator) Close() error {
	var err error
	it.closeOnce.Do(func() {
		it.cancel()
		it.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), it.c.opts.RequestTimeout)
		defer cancel()
		err = it.c.call(ctx, api.MethodDetach, api.JobRequest{Job: it.job, Consumer: it.consumer}, nil)
	})
	return err
}

// supervise renews the consumer lease, starts a stream to every worker of
// the job (including ones that join later), reopens failed streams of
// workers still alive, drops expired workers, and ends the iteration once
// every remaining worker has finished.
func (it *Iterator) supervise() {
	defer it.wg.Done()
	var streams sync.WaitGroup
	beats := make(chan api.JobInfo, 1)
	var beater sync.WaitGroup
	defer func() {
		it.cancel()
		beater.Wait()
		streams.Wait()
		close(it.items)
	}()
	// Heartbeats run on their own goroutine: during a control-plane outage
	// each may block for RequestTimeout, and the data side (reopening
	// streams, noticing the end of data) must not wait for them.
	beater.Add(1)
	go it.heartbeat(&beater, beats)
	it.reconcile(&streams)
	for {
		select {
		case <-it.ctx.Done():
			it.finish(context.Canceled)
			return
		case info := <-beats:
			it.mu.Lock()
			it.info = info
			it.mu.Unlock()
		case <-it.wake:
		}
		if it.reconcile(&streams) {
			return
		}
	}
}

// heartbeat renews the consumer's lease every HeartbeatInterval and posts
// the job's current state to supervise (the newest replaces an unread one).
// A job that no longer exists ends the iteration.
func (it *Iterator) heartbeat(wg *sync.WaitGroup, beats chan api.JobInfo) {
	defer wg.Done()
	tick := time.NewTicker(it.c.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-it.ctx.Done():
			return
		case <-tick.C:
		}
		var info api.JobInfo
		err := it.c.call(it.ctx, api.MethodHeartbeat, api.JobRequest{Job: it.job, Consumer: it.consumer}, &info)
		switch {
		case it.ctx.Err() != nil:
			return
		case errors.Is(err, transport.ErrNotFound):
			it.finish(fmt.Errorf("job %q: it no longer exists (garbage-collected?): %w", it.job, err))
			it.cancel()
			return
		case err != nil:
			it.c.opts.Logger.Warn("heartbeat failed", "job", it.job, "err", err)
			continue
		}
		select {
		case <-beats: // drop the unread older state
		default:
		}
		beats <- info
	}
}

// reconcile starts and drops streams; it reports whether the job ended.
func (it *Iterator) reconcile(streams *sync.WaitGroup) bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.err != nil {
		return true
	}
	for _, w := range it.info.Workers {
		s := it.streams[w.Name]
		if s == nil {
			s = &streamState{}
			it.streams[w.Name] = s
		}
		if w.Addr != "" {
			s.addr = w.Addr
		}
		if w.Expired && !s.done {
			if !s.dropped {
				it.c.opts.Logger.Info("worker expired; dropping it", "job", it.job, "worker", w.Name)
			}
			s.dropped = true
			continue
		}
		for s.running < it.c.opts.StreamsPerWorker && !s.done && !s.dropped && s.addr != "" && !time.Now().Before(s.retryAt) {
			if s.fails > 0 {
				it.stats.Reconnects++
			}
			s.running++
			streams.Add(1)
			go it.stream(streams, w.Name, s.addr)
		}
	}
	if len(it.streams) == 0 {
		return false
	}
	for _, s := range it.streams {
		// A finished worker's other streams still deliver what they hold
		// before their own end of data: wait for them.
		if !s.dropped && (!s.done || s.running > 0) {
			return false
		}
	}
	it.err = io.EOF
	return true
}

func (it *Iterator) finish(err error) {
	it.mu.Lock()
	if it.err == nil {
		it.err = err
	}
	it.mu.Unlock()
}

func (it *Iterator) signal() {
	select {
	case it.wake <- struct{}{}:
	default:
	}
}

// stream reads one worker's batches into the shared buffer.
func (it *Iterator) stream(wg *sync.WaitGroup, worker, addr string) {
	defer wg.Done()
	err := it.readWorker(worker, addr)
	it.mu.Lock()
	s := it.streams[worker]
	s.running--
	var re *batch.RemoteError
	switch {
	case err == nil:
		s.done = true
	case (errors.As(err, &re) || errors.Is(err, batch.ErrUnsupportedVersion)) && s.dropped:
		// A worker already expired from the job: what it says no longer
		// matters to the job.
	case errors.As(err, &re):
		// The worker's pipeline failed: the job fails with its message.
		if it.err == nil {
			it.err = fmt.Errorf("job %q: worker %s: %s", it.job, worker, re.Message)
		}
		it.cancel()
	case errors.Is(err, batch.ErrUnsupportedVersion):
		// The worker does not speak this client's protocol version:
		// retrying cannot help, and the error says what to upgrade.
		if it.err == nil {
			it.err = fmt.Errorf("job %q: worker %s: %w", it.job, worker, err)
		}
		it.cancel()
	case it.ctx.Err() == nil:
		s.fails++
		// Back off before reopening, so a worker that fails fast (closing,
		// resetting streams) is not hammered in a loop.
		s.retryAt = time.Now().Add(min(50*time.Millisecond<<min(s.fails, 6), 2*time.Second))
		it.c.opts.Logger.Warn("worker stream failed; will retry unless the worker is expired", "job", it.job, "worker", worker, "err", err)
	}
	it.mu.Unlock()
	it.signal()
}

func (it *Iterator) readWorker(worker, addr string) error {
	rec := it.c.recorder()
	r, err := batch.OpenConfig(it.ctx, it.c.tr, it.c.codec, addr,
		batch.OpenRequest{Job: it.job, Consumer: it.consumer, Window: it.c.opts.Window, Compression: it.comp}, it.c.receiverConfig(rec, true))
	if err != nil {
		return err
	}
	defer r.Close()
	for first := true; ; first = false {
		h, el, err := r.Next(it.ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("worker %s closed the stream (shutting down?): %w", worker, err)
		}
		if err != nil {
			return err
		}
		if first {
			it.mu.Lock()
			it.streams[worker].fails = 0
			it.mu.Unlock()
		}
		size := int64(el.ByteSize())
		if err := it.budget.acquire(it.ctx, size); err != nil {
			return err
		}
		select {
		case it.items <- item{b: Batch{Element: el, Worker: worker, Seq: h.Seq, Epoch: h.Epoch, batched: it.batched, buf: recyclable(rec)}, size: size, wire: r.LastWireBytes()}:
		case <-it.ctx.Done():
			it.budget.release(size)
			return it.ctx.Err()
		}
	}
}

// Workers lists the job's workers as last heard.
func (it *Iterator) Workers() []api.WorkerInfo {
	it.mu.Lock()
	defer it.mu.Unlock()
	out := append([]api.WorkerInfo(nil), it.info.Workers...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// byteBudget bounds the bytes of buffered batches. A batch larger than the
// whole budget is let through alone, so it cannot deadlock.
type byteBudget struct {
	mu    sync.Mutex
	avail int64
	max   int64
	wake  chan struct{}
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{avail: max, max: max, wake: make(chan struct{})}
}

func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.max)
	for {
		b.mu.Lock()
		if b.avail >= n {
			b.avail -= n
			b.mu.Unlock()
			return nil
		}
		ch := b.wake
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *byteBudget) release(n int64) {
	n = min(n, b.max)
	b.mu.Lock()
	b.avail += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}
