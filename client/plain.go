package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
)

// The plain engine: StreamsPerWorker streams to every worker of the job
// (including ones that join later), each with its own credit window, all
// putting batches into the Iterator's prefetch buffer. A failed stream is
// reopened after the retry policy's delay while its worker is alive; an
// expired worker is dropped; the iteration ends once every worker that was
// not dropped has sent its end of data. Dropping is final, and safe: a
// worker expired from a job is out of it for good (the leader never
// assigns it to the job again, and its leases are refused), so it holds no
// split the iteration would wait for; the splits it held were counted lost.

// workerStreams is what the plain engine knows of one worker's streams.
type workerStreams struct {
	// ctx ends the worker's streams (cancel: when it is dropped).
	ctx    context.Context
	cancel context.CancelFunc
	fenced bool // exactly-once: its fence was queued (dropped, no stream left)
	// inc is the worker's incarnation as last heard; refence: it changed
	// (a restart) after streams were opened, so the streams are being
	// stopped to fence the old process (exactly-once).
	inc uint64
	// rejoined: assigned afresh after the worker drained or was
	// expired; inc is then the old process's (the job keeps it across a
	// rejoin) until the new process leases. That change is no restart
	// mid-stream (the streams opened since are the new process's), but
	// the old process may have leased after the rejoin: its fence goes
	// out then, without stopping the streams.
	rejoined bool
	opened   bool
	broke    bool // a stream failed since the last fence
	refence  bool
	addr     string
	running  int  // streams open to the worker (up to StreamsPerWorker)
	done     bool // the worker sent its end of data on a stream
	// paused: the worker's process drained (a graceful shutdown) and
	// ended its streams; its next process rejoins the job (assigned
	// afresh: since changes) and the worker's streams start over.
	paused  bool
	since   int64 // when the worker was assigned the job (api.WorkerInfo.Since)
	dropped bool  // the worker was expired: it will never finish
	fails   int   // consecutive failed streams; reset by a batch
	retryAt time.Time
}

// canOpen reports whether another stream to the worker may be opened at
// now, with up to perWorker streams per worker.
func (s *workerStreams) canOpen(now time.Time, perWorker int) bool {
	return s.running < perWorker && !s.done && !s.paused && !s.dropped && !s.refence && s.addr != "" && !now.Before(s.retryAt)
}

// waiting reports whether the worker would get another stream but for its
// retry delay.
func (s *workerStreams) waiting(now time.Time, perWorker int) bool {
	return s.running < perWorker && !s.done && !s.paused && !s.dropped && s.addr != "" && now.Before(s.retryAt)
}

// finished reports whether the worker has nothing more to deliver: it was
// dropped, or it sent its end of data and its other streams have delivered
// what they held before theirs. A worker that paused (drained) is finished
// only once the job is not running any more (jobRunning false): until
// then its next process may rejoin with more, or, if it never comes back,
// the others read what is left and the job finishes.
func (s *workerStreams) finished(jobRunning bool) bool {
	if s.paused && jobRunning {
		return false
	}
	return s.dropped || ((s.done || s.paused) && s.running == 0)
}

// allDropped reports whether workers are known and every one was
// dropped (expired).
func allDropped(ws map[string]*workerStreams) bool {
	for _, s := range ws {
		if !s.dropped {
			return false
		}
	}
	return len(ws) > 0
}

// allFinished reports whether the job has ended: at least one worker is
// known and every one has finished.
func allFinished(ws map[string]*workerStreams, jobRunning bool) bool {
	if len(ws) == 0 {
		return false
	}
	for _, s := range ws {
		if !s.finished(jobRunning) {
			return false
		}
	}
	return true
}

type plain struct {
	it        host
	job       string
	consumer  string
	batched   bool
	perWorker int
	window    int
	retry     retryPolicy
	log       *slog.Logger
	ledger    *ledger // exactly-once jobs; nil otherwise
	// local is this consumer's local worker (offload), run beside the
	// streams; nil without one. localBeats counts the heartbeats heard
	// since it finished: the end waits for one that started after, so
	// that a node assigned meanwhile is known and read to its end.
	local      *localWorker
	localEnded bool
	localBeats int

	info    api.JobInfo   // as last heard; owned by run
	wake    chan struct{} // a stream ended: reconcile
	streams sync.WaitGroup

	mu      sync.Mutex
	workers map[string]*workerStreams
}

func newPlain(it host, info api.JobInfo, consumer string, o Options, batched bool, l *ledger) *plain {
	return &plain{
		it: it, job: info.Name, consumer: consumer, batched: batched, perWorker: o.StreamsPerWorker, window: o.Window,
		retry: defaultRetry, log: o.Logger, info: info, ledger: l,
		wake: make(chan struct{}, 1), workers: map[string]*workerStreams{},
	}
}

// beat is a plain heartbeat: it renews the lease.
func (p *plain) beat() api.JobRequest {
	return api.JobRequest{Job: p.job, Consumer: p.consumer}
}

// run starts and drops streams as heartbeats and ended streams tell, until
// every worker has finished.
func (p *plain) run(ctx context.Context, beats <-chan api.JobInfo) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // the streams of expired workers may still be reading
		p.streams.Wait()
	}()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	localDone := make(chan error, 1)
	if p.local != nil {
		p.streams.Add(1)
		go func() {
			defer p.streams.Done()
			localDone <- p.local.run(ctx)
		}()
	}
	for {
		ended, next := p.reconcile(ctx)
		if ended {
			return io.EOF
		}
		// A worker whose stream failed is retried when its delay is over,
		// not only at the next heartbeat or stream end.
		var due <-chan time.Time
		if !next.IsZero() {
			retry.Reset(time.Until(next))
			due = retry.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p.info = <-beats:
			if p.localEnded {
				p.localBeats++
			}
		case <-p.wake:
		case <-due:
		case err := <-localDone:
			if err != nil && ctx.Err() == nil {
				return err
			}
			p.localEnded = true
			p.it.kickHeartbeat()
		}
	}
}

// reconcile opens the streams the workers are due, drops expired workers,
// and reports whether the job has ended and, if a failed worker waits for
// its retry delay, when the earliest one is due.
func (p *plain) reconcile(ctx context.Context) (ended bool, next time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil {
		return false, time.Time{}
	}
	now := time.Now()
	for _, w := range p.info.Workers {
		if _, local := w.LocalWorker(); local {
			// A consumer's local worker (offload): its batches reach only
			// that consumer, in process (this one's runs beside the
			// streams); nothing to read or fence here.
			continue
		}
		s := p.streamsOf(ctx, w)
		p.hearIncarnation(ctx, w, s)
		if w.Expired {
			p.drop(w.Name, s)
			continue
		}
		p.openStreams(ctx, w.Name, s, now)
		if s.waiting(now, p.perWorker) && (next.IsZero() || s.retryAt.Before(next)) {
			next = s.retryAt
		}
	}
	return p.ended(), next
}

// streamsOf returns what the engine knows of worker w's streams: new for
// a worker first heard of, and started over for one that rejoined the
// job (assigned afresh), whose old process is then fenced. p.mu is held.
func (p *plain) streamsOf(ctx context.Context, w api.WorkerInfo) *workerStreams {
	s := p.workers[w.Name]
	if s != nil && w.Since != s.since && s.since != 0 && w.Since != 0 && s.running == 0 {
		// Assigned afresh: a new process of a worker that drained, or
		// was expired, rejoined the job. Exactly-once: nothing of the
		// old process is read any more (no stream runs), so it is
		// fenced, as a dropped worker is, before reading the new one.
		p.log.Info("worker rejoined the job; reading from it again", "job", p.job, "worker", w.Name)
		if p.ledger != nil && !s.fenced {
			p.ledger.fence(w.Name)
		}
		if s.opened && !s.done && !s.paused && !s.dropped {
			p.it.countDropped() // the old process died mid-stream, unseen
		}
		s.cancel()
		s = nil
	}
	if s == nil {
		s = &workerStreams{since: w.Since}
		if old := p.workers[w.Name]; old != nil {
			// A rejoin (see rejoined). If the new process has leased
			// already, its lease has expired whatever the old one
			// took after the rejoin: fence it now.
			s.inc, s.rejoined = w.Incarnation, true
			if w.Incarnation != old.inc && w.Incarnation != 0 && old.inc != 0 {
				s.rejoined = false
				if p.ledger != nil {
					p.ledger.fence(w.Name)
				}
			}
		}
		s.ctx, s.cancel = context.WithCancel(ctx)
		p.workers[w.Name] = s
	}
	if w.Addr != "" {
		s.addr = w.Addr
	}
	return s
}

// hearIncarnation takes in worker w's incarnation as last heard: a new
// process after a rejoin, or a restart while it streamed, whose streams
// are stopped so that the old process is fenced (exactly-once). p.mu is
// held.
func (p *plain) hearIncarnation(ctx context.Context, w api.WorkerInfo, s *workerStreams) {
	if s.rejoined && w.Incarnation != s.inc {
		// The rejoined worker's new process leased (see rejoined).
		s.rejoined = false
		if p.ledger != nil {
			p.ledger.fence(w.Name)
		}
		s.inc = w.Incarnation
	}
	if w.Incarnation != s.inc && s.inc != 0 && s.opened && !s.dropped && !s.done && !s.paused {
		// The worker's process restarted while it streamed to this
		// consumer (before it was declared dead): what the old one had
		// made and not sent is gone (at-most-once), or read again.
		p.it.countDropped()
	}
	if p.ledger != nil && w.Incarnation != s.inc {
		if !s.dropped && (s.inc != 0 || s.broke) {
			// A restart (from a known incarnation, or one this
			// consumer did not hear of but whose stream broke): the
			// old process's leases are orphaned until this consumer
			// fences it. Stop every stream (one may still be the old
			// process's) and fence once none reads; the new process
			// resends what its stopped streams had not credited. The
			// first incarnation heard is the worker's first lease,
			// not a restart. A consumer that has opened no stream to
			// the worker yet fences too (at once: nothing reads): a
			// rejoined worker keeps its last incarnation, and a lease
			// its old process took after the rejoin waits for it.
			p.log.Info("worker restarted; reopening its streams", "job", p.job, "worker", w.Name)
			s.cancel()
			s.ctx, s.cancel = context.WithCancel(ctx)
			s.refence = true
			p.fenceIfIdle(w.Name, s)
		}
	}
	s.inc = w.Incarnation
}

// drop drops a worker the job expired: it will never finish, and nothing
// more is read from it (exactly-once: it is fenced once no stream
// reads). p.mu is held.
func (p *plain) drop(worker string, s *workerStreams) {
	switch {
	case !s.done:
		if !s.dropped {
			p.log.Info("worker expired; dropping it", "job", p.job, "worker", worker)
			if s.opened && !s.paused {
				p.it.countDropped()
			}
		}
		s.dropped = true
		s.cancel() // exactly-once: nothing more may be read from it
		p.fenceIfIdle(worker, s)
	case !s.dropped:
		// Expired after it sent its end of data (cut off from the
		// leader after its last batch, say): nothing is lost, but
		// exactly-once its produced splits that have not settled are
		// orphaned until every consumer fences it, and every batch it
		// sent is in the ledger already.
		s.dropped = true
		p.fenceIfIdle(worker, s)
	}
}

// openStreams starts the streams the worker is due at now. p.mu is held.
func (p *plain) openStreams(ctx context.Context, worker string, s *workerStreams, now time.Time) {
	for s.canOpen(now, p.perWorker) {
		if s.fails > 0 {
			p.it.countReconnect()
		}
		s.running++
		s.opened = true
		p.streams.Add(1)
		go p.stream(ctx, s.ctx, worker, s.addr)
	}
}

// ended reports whether the job has ended for this consumer: every
// worker has finished, and its local worker too when it has one. p.mu is
// held.
func (p *plain) ended() bool {
	running := p.info.State == "" || p.info.State == api.JobRunning
	if running && p.info.Options.Sharding == jobspec.Dynamic && allDropped(p.workers) {
		// Every worker it knows died, but a DYNAMIC job that runs on
		// has splits left (a dead worker's, read again under
		// exactly-once, and those never leased) for the worker the
		// cluster gives it next: not the end (systemtest/compose saw
		// an autoscaling job's only worker die, and its consumer end
		// after 4 batches).
		return false
	}
	if p.local != nil {
		// With a local worker, the end is its end, once a heartbeat
		// started after it was heard, and every node's.
		done := p.localEnded && p.localBeats >= 2
		return done && (len(p.workers) == 0 || allFinished(p.workers, running))
	}
	return allFinished(p.workers, running)
}

// stream reads one stream of a worker into the Iterator's buffer, and
// records how it ended.
// ctx is the engine's; sctx, a child, ends this worker's streams (dropped
// or restarted): it stops the reading, not the put of a batch already
// received (exactly-once has reported it received).
func (p *plain) stream(ctx, sctx context.Context, worker, addr string) {
	defer p.streams.Done()
	end, msg, err := p.read(ctx, sctx, worker, addr)
	ctx = sctx
	p.mu.Lock()
	s := p.workers[worker]
	s.running--
	switch {
	case end == endOfData:
		s.done = true
	case end == endPaused:
		s.paused = true
	case end == endRefused && s.dropped:
		// A worker already expired from the job: what it says no longer
		// matters to the job.
	case end == endRefused:
		// The worker's pipeline failed: the job fails with its message.
		p.it.fail(workerFailed(p.job, worker, msg, err))
	case ctx.Err() == nil:
		s.broke = true
		s.fails++
		s.retryAt = time.Now().Add(p.retry.delay(s.fails))
		p.log.Warn("worker stream failed; will retry unless the worker is expired", "job", p.job, "worker", worker, "err", err)
	}
	p.fenceIfIdle(worker, s)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fenceIfIdle queues the fence of a dropped worker of an exactly-once job
// once none of its streams is reading: everything read from it is then in
// the ledger. p.mu is held.
func (p *plain) fenceIfIdle(worker string, s *workerStreams) {
	if p.ledger == nil || s.running > 0 {
		return
	}
	switch {
	case s.dropped && !s.fenced:
		s.fenced = true
		p.ledger.fence(worker)
	case s.refence:
		s.refence, s.broke = false, false
		p.ledger.fence(worker)
		select { // reopen now, not at the next heartbeat
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// read opens a stream to the worker and puts its batches into the
// Iterator's buffer until the stream ends.
func (p *plain) read(ctx, sctx context.Context, worker, addr string) (ending, string, error) {
	st, err := p.it.openStream(sctx, worker, addr, streamRequest{Window: p.window, Grow: true})
	if err != nil {
		return endBroken, "", err
	}
	defer st.close()
	for first := true; ; first = false {
		h, el, err := st.next(sctx)
		if err != nil {
			end, msg := endingOf(err)
			return end, msg, err
		}
		if first {
			p.mu.Lock()
			p.workers[worker].fails = 0
			p.mu.Unlock()
		}
		if p.ledger != nil {
			// Received is delivered: the receipt goes out now, not once
			// the batch is in the buffer, so that no consumer's end of
			// data waits on another consumer's trainer taking its
			// buffered batches.
			if dup, n := p.ledger.record(h.Prov); dup {
				// A batch its worker sent again after a stream failed
				// that had in fact reached this consumer.
				p.log.Debug("exactly-once: dropped a batch received before", "job", p.job, "worker", worker, "elements", n)
				continue
			} else if n > 0 {
				p.log.Error("exactly-once: a batch partly received before (a bug: please report it)", "job", p.job, "worker", worker, "elements", n)
			}
		}
		size := int64(el.ByteSize())
		x := item{b: st.batch(h, el, p.batched), size: size, wire: st.wireBytes()}
		if len(h.Extra) > 0 {
			// An element of a cut job (api.CutHeader): the suffix runs
			// the rest (cut.go).
			var ch api.CutHeader
			if err := cbor.Unmarshal(h.Extra, &ch); err != nil || ch.Cut <= 0 {
				err = fmt.Errorf("worker %s sent a batch whose header extra (%d bytes) is not a cut: %v", worker, len(h.Extra), err)
				return endRefused, err.Error(), err
			}
			x.cut = ch.Cut
		}
		if p.ledger != nil {
			x.prov = slices.Clone(h.Prov) // h.Prov is the decoder's, reused
		}
		if err := p.it.put(ctx, x); err != nil {
			return endBroken, "", err
		}
	}
}
