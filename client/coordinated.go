package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/bucketing"
	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Coordinated reads on the client (JobOptions.Coordinated).
//
// The iterator reads rounds in order: round r comes from the worker that the
// job's schedule (held in Raft, learned from heartbeats) names for r, and
// holds batch ConsumerIndex of that worker's window for r. Up to
// PrefetchBatches rounds are asked for ahead, each worker's rounds in
// increasing order on one fetcher (that order is what lets every consumer
// get the same answer for a round, see mesh/coordinated.go).
//
// The iterator never asks for a round at or past its horizon: its own last
// committed report (a heartbeat with Report) + the job's lookahead. Raft
// changes the rotation only from max(reports) + lookahead on, and the
// answer that moves the horizon carries the schedule, so the iterator never
// reads a round under a stale rotation. It reports the round it has asked
// up to on every heartbeat and as soon as half its lookahead is used.
//
// Rounds are skipped, never waited for, when their worker is expired (it
// died: its rounds until it is evicted from the rotation are lost), when
// the worker answers skip (the round was dropped, or this index's batch was
// taken by an earlier instance of the consumer), or when the worker has
// reached its end of data. The iteration ends when every worker that serves
// a round from the current one on has ended or is expired: every consumer
// sees the same answers, so all end at the same round.
//
// A consumer restarted with the same job and index resumes at the round its
// previous instance had reported; an index not seen before starts at round 0
// (the workers still hold the rounds the others have read ahead, up to
// their RoundsHeld).

// RoundStat describes one delivered round.
type RoundStat struct {
	Round  int64  `json:"round"`
	Worker string `json:"worker"`
	Bucket int    `json:"bucket"`
	// PaddedTokens is the padded token count of each consumer's batch in
	// the round, by consumer index.
	PaddedTokens []int64 `json:"padded_tokens"`
	// Tokens is the real token count of this consumer's batch.
	Tokens int64 `json:"tokens"`
}

type roundKind int

const (
	roundBatch roundKind = iota
	roundSkip
	roundEnd
	roundFail
)

type roundResult struct {
	round  int64
	worker string
	kind   roundKind
	b      Batch
	size   int64
	wire   int64 // bytes on the stream
	err    error
}

// fetcher asks one worker for its rounds, in order.
type fetcher struct {
	queue  chan int64
	ctx    context.Context
	cancel context.CancelFunc
}

// coordinator is the coordinated iterator's state, owned by coordinate.
type coordinator struct {
	it       *Iterator
	index    int
	sched    bucketing.Schedule
	started  bool
	horizon  int64
	next     int64
	disp     atomic.Int64
	ended    map[string]bool
	expired  map[string]bool
	results  map[int64]roundResult
	fetchers map[string]*fetcher
	resCh    chan roundResult
	infoCh   chan api.JobInfo
	kick     chan struct{}
	wg       sync.WaitGroup
}

// coordinate runs a coordinated iterator until the end of data, an error or
// Close.
func (it *Iterator) coordinate() {
	defer it.wg.Done()
	window := it.c.opts.PrefetchBatches
	co := &coordinator{it: it, index: it.index, ended: map[string]bool{}, expired: map[string]bool{},
		results: map[int64]roundResult{}, fetchers: map[string]*fetcher{},
		resCh: make(chan roundResult, window), infoCh: make(chan api.JobInfo, 1), kick: make(chan struct{}, 1)}
	defer func() {
		it.cancel()
		for _, f := range co.fetchers {
			close(f.queue)
			f.cancel()
		}
		// Fetchers may be blocked sending results: drain until they return.
		done := make(chan struct{})
		go func() { co.wg.Wait(); close(done) }()
		for {
			select {
			case <-co.resCh:
				continue
			case <-done:
			}
			break
		}
		close(it.items)
	}()
	it.mu.Lock()
	info := it.info
	it.mu.Unlock()
	start := int64(0)
	if r := info.Rounds; r != nil {
		if v, ok := r.Reached[co.index]; ok {
			start = v // a restarted consumer resumes where its index was
		}
	}
	co.next = start
	co.disp.Store(start)
	co.wg.Add(1)
	go co.heartbeats()
	co.kickReport()
	if err := co.loop(window); err != nil {
		it.finish(err)
	}
}

// loop dispatches, collects and delivers rounds; it returns io.EOF at the
// end of data.
func (co *coordinator) loop(window int) error {
	it := co.it
	for {
		if err := co.dispatch(window); err != nil {
			return err
		}
		for {
			r, ok := co.results[co.next]
			if !ok {
				break
			}
			delete(co.results, co.next)
			if r.kind == roundFail {
				return r.err
			}
			if r.kind == roundBatch {
				if err := co.deliver(r); err != nil {
					return err
				}
			} else if r.kind == roundSkip {
				it.mu.Lock()
				it.stats.SkippedRounds++
				it.mu.Unlock()
			}
			co.next++
		}
		if co.next == co.disp.Load() && co.started {
			if done, err := co.finished(); done {
				return err
			}
		}
		select {
		case r := <-co.resCh:
			co.collect(r)
		case info := <-co.infoCh:
			co.apply(info)
		case <-it.ctx.Done():
			return context.Canceled
		}
	}
}

// dispatch asks for rounds up to the horizon and the prefetch window.
func (co *coordinator) dispatch(window int) error {
	for co.started && co.disp.Load() < co.horizon && co.disp.Load() < co.next+int64(window) {
		d := co.disp.Load()
		w, err := co.sched.WorkerFor(d)
		if err != nil {
			return nil // no rotation yet: wait for a heartbeat
		}
		if co.ended[w] {
			co.results[d] = roundResult{round: d, worker: w, kind: roundSkip}
		} else if co.expired[w] {
			co.results[d] = roundResult{round: d, worker: w, kind: roundSkip}
		} else {
			f := co.fetcher(w)
			select {
			case f.queue <- d:
			default:
				return nil // that worker's queue is full; try after a result
			}
		}
		co.disp.Store(d + 1)
		if d+1 >= co.horizon-co.lookahead()/2 {
			co.kickReport()
		}
	}
	return nil
}

func (co *coordinator) lookahead() int64 {
	co.it.mu.Lock()
	defer co.it.mu.Unlock()
	if r := co.it.info.Rounds; r != nil {
		return r.Lookahead
	}
	return 0
}

// collect records a fetcher's answer.
func (co *coordinator) collect(r roundResult) {
	if r.kind == roundEnd {
		co.ended[r.worker] = true
		r.kind = roundSkip
	}
	if r.round >= co.next {
		co.results[r.round] = r
	}
}

// deliver hands a batch to Next, still answering heartbeats meanwhile.
func (co *coordinator) deliver(r roundResult) error {
	it := co.it
	for {
		select {
		case it.items <- item{b: r.b, size: r.size, wire: r.wire}:
			it.mu.Lock()
			it.stats.Rounds++
			if h := r.b.Round; h != nil {
				it.rounds = append(it.rounds, RoundStat{Round: h.Round, Worker: r.worker, Bucket: h.Bucket, PaddedTokens: h.PaddedTokens, Tokens: h.Tokens})
				if over := len(it.rounds) - it.c.opts.RoundStatsLimit; over > 0 {
					it.rounds = append(it.rounds[:0], it.rounds[over:]...)
				}
			}
			it.mu.Unlock()
			return nil
		case info := <-co.infoCh:
			co.apply(info)
		case <-it.ctx.Done():
			return context.Canceled
		}
	}
}

// finished reports whether every worker serving a round from next on has
// ended or is expired.
func (co *coordinator) finished() (bool, error) {
	if len(co.sched.Changes) == 0 {
		return false, nil
	}
	ws := co.sched.RotationAt(co.next)
	for _, c := range co.sched.Changes {
		if c.From > co.next {
			ws = append(ws, c.Workers...)
		}
	}
	anyEnded := false
	for _, w := range ws {
		if !co.ended[w] && !co.expired[w] {
			return false, nil
		}
		anyEnded = anyEnded || co.ended[w]
	}
	if !anyEnded {
		return true, fmt.Errorf("job %q: every worker of the rotation is gone", co.it.job)
	}
	return true, io.EOF
}

// apply takes a heartbeat's answer: schedule, horizon and expired workers.
func (co *coordinator) apply(info api.JobInfo) {
	it := co.it
	it.mu.Lock()
	it.info = info
	it.mu.Unlock()
	if r := info.Rounds; r != nil {
		if v, ok := r.Reached[co.index]; ok {
			co.sched = bucketing.Schedule{Changes: r.Changes}
			co.horizon = max(co.horizon, v+r.Lookahead)
			co.started = true
		}
	}
	for _, w := range info.Workers {
		if w.Expired && !co.expired[w.Name] {
			co.expired[w.Name] = true
			if f := co.fetchers[w.Name]; f != nil {
				close(f.queue)
				f.cancel()
				delete(co.fetchers, w.Name)
			}
		} else if !w.Expired {
			delete(co.expired, w.Name)
		}
	}
}

func (co *coordinator) kickReport() {
	select {
	case co.kick <- struct{}{}:
	default:
	}
}

// heartbeats renews the consumer lease and reports the round reached, every
// HeartbeatInterval and when kicked; answers go to infoCh in order.
func (co *coordinator) heartbeats() {
	defer co.wg.Done()
	it := co.it
	tick := time.NewTicker(it.c.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-co.kick:
		case <-it.ctx.Done():
			return
		}
		req := api.JobRequest{Job: it.job, Consumer: it.consumer, Report: true, Index: co.index, Round: co.disp.Load()}
		var info api.JobInfo
		if err := it.c.call(it.ctx, api.MethodHeartbeat, req, &info); err != nil {
			if it.ctx.Err() == nil {
				it.c.opts.Logger.Warn("heartbeat failed", "job", it.job, "err", err)
			}
			continue
		}
		select {
		case co.infoCh <- info:
		case <-it.ctx.Done():
			return
		}
	}
}

// fetcher returns the worker's fetcher, starting it on first use.
func (co *coordinator) fetcher(w string) *fetcher {
	if f := co.fetchers[w]; f != nil {
		return f
	}
	f := &fetcher{queue: make(chan int64, co.it.c.opts.PrefetchBatches)}
	f.ctx, f.cancel = context.WithCancel(co.it.ctx)
	co.fetchers[w] = f
	co.wg.Add(1)
	go co.fetch(w, f)
	return f
}

// fetch asks worker for each queued round, retrying transport failures
// until the worker answers or is expired (then the round is skipped).
func (co *coordinator) fetch(worker string, f *fetcher) {
	defer co.wg.Done()
	it := co.it
	for round := range f.queue {
		var r roundResult
		for attempt := 0; ; attempt++ {
			if f.ctx.Err() != nil {
				r = roundResult{round: round, worker: worker, kind: roundSkip}
				break
			}
			var retry bool
			r, retry = co.readRound(f.ctx, worker, round)
			if !retry {
				break
			}
			if attempt > 0 {
				it.mu.Lock()
				it.stats.Reconnects++
				it.mu.Unlock()
			}
			select {
			case <-time.After(it.c.opts.HeartbeatInterval / 4):
			case <-f.ctx.Done():
			}
		}
		select {
		case co.resCh <- r:
		case <-it.ctx.Done():
			return
		}
	}
}

// readRound asks worker for one round; retry says a transport failure.
func (co *coordinator) readRound(ctx context.Context, worker string, round int64) (roundResult, bool) {
	it := co.it
	res := roundResult{round: round, worker: worker}
	addr := ""
	it.mu.Lock()
	for _, w := range it.info.Workers {
		if w.Name == worker {
			addr = w.Addr
		}
	}
	it.mu.Unlock()
	if addr == "" {
		return res, true
	}
	extra, err := cbor.Marshal(api.RoundRequest{Round: round, Index: co.index})
	if err != nil {
		res.kind, res.err = roundFail, err
		return res, false
	}
	rec := it.c.recorder()
	r, err := batch.OpenConfig(ctx, it.c.tr, it.c.codec, addr,
		batch.OpenRequest{Job: it.job, Consumer: it.consumer, Window: 1, Extra: extra, Compression: it.comp}, it.c.receiverConfig(rec, false))
	if err != nil {
		return res, true
	}
	defer r.Close()
	h, el, err := r.Next(ctx)
	var re *batch.RemoteError
	switch {
	case errors.Is(err, io.EOF):
		res.kind = roundEnd
		return res, false
	case errors.As(err, &re) && api.IsRoundSkipped(re.Message):
		res.kind = roundSkip
		return res, false
	case errors.As(err, &re):
		res.kind, res.err = roundFail, fmt.Errorf("job %q: worker %s: %s", it.job, worker, re.Message)
		return res, false
	case errors.Is(err, batch.ErrUnsupportedVersion):
		res.kind, res.err = roundFail, fmt.Errorf("job %q: worker %s: %w", it.job, worker, err)
		return res, false
	case err != nil:
		return res, true
	}
	var rh api.RoundHeader
	if err := cbor.Unmarshal(h.Extra, &rh); err != nil || rh.Round != round {
		res.kind, res.err = roundFail, fmt.Errorf("job %q: worker %s sent round %d without a valid round header", it.job, worker, round)
		return res, false
	}
	res.kind = roundBatch
	res.size, res.wire = int64(el.ByteSize()), r.LastWireBytes()
	res.b = Batch{Element: el, Worker: worker, Seq: h.Seq, Epoch: h.Epoch, Round: &rh, batched: it.batched, buf: recyclable(rec)}
	return res, false
}

// RoundStats returns the last rounds delivered (at most
// Options.RoundStatsLimit), oldest first: per round the serving worker, the
// bucket and every consumer's padded token count. Empty for jobs that are
// not coordinated.
func (it *Iterator) RoundStats() []RoundStat {
	it.mu.Lock()
	defer it.mu.Unlock()
	return append([]RoundStat(nil), it.rounds...)
}
