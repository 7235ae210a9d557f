package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/rounds"
	"github.com/feedmesh/feedmesh/tensor"
)

// Coordinated reads on the client (JobOptions.Coordinated).
//
// The iterator reads rounds in order: round r comes from the worker that the
// job's schedule (held in Raft, learned from heartbeats) names for r, and
// holds batch ConsumerIndex of that worker's window for r. Up to
// PrefetchBatches rounds are asked for ahead, each worker's rounds in
// increasing order on one fetcher (rounds.go; that order is what lets every
// consumer get the same answer for a round, see mesh/roundserver.go).
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
// sees the same answers, so all end at the same round. Expiry is final: a
// worker expired from the job is out of it for good and never re-enters
// its rotation, so a round skipped for it is never served by it later.
//
// Exactly-once (JobOptions.Delivery, splits/exactly.go): batches carry
// their elements, recorded in the ledger as they arrive and receipted as
// for a plain job. A worker that is expired, or restarted, is fenced once
// its fetcher has returned; its unreceipted splits are read again by the
// others and come back in later rounds. Each round this consumer loses
// (roundLost: its worker died or was restarted before serving it, or
// answered skip) while data goes on becomes a filler, an empty batch with
// Round.Filler set, so every consumer still gets one batch per round and
// data-parallel ranks take the same number of steps. A lost round's filler
// waits for the next batch: lost rounds after the last batch (a dead
// worker's rounds at the end of data) give none.
//
// A consumer restarted with the same job and index resumes at the round its
// previous instance had reported; an index not seen before starts at round 0
// (the workers still hold the rounds the others have read ahead, up to
// their RoundsHeld).

// coordinator is the coordinated engine. Its fields below wg are owned by
// run's goroutine.
type coordinator struct {
	it       host
	job      string
	consumer string
	index    int
	batched  bool
	m        int // the job's consumers
	window   int // rounds asked for ahead: PrefetchBatches
	retry    retryPolicy
	log      *slog.Logger

	ledger *ledger // exactly-once jobs; nil otherwise

	disp    atomic.Int64 // the next round to ask for; reported by beat
	resCh   chan roundResult
	wg      sync.WaitGroup // the fetchers
	sched   rounds.Schedule
	started bool // a heartbeat answered with the schedule
	horizon int64
	look    int64 // the job's lookahead
	next    int64 // the next round to deliver
	ended   map[string]bool
	expired map[string]bool
	results map[int64]roundResult
	fetch   map[string]*fetcher
	inc     map[string]uint64 // exactly-once: each worker's incarnation heard
	lost    []roundResult     // exactly-once: lost rounds whose fillers wait for a batch
	tmpl    *tensor.Element   // exactly-once: a batch's tensors with no rows, a filler's
}

func newCoordinator(it host, info api.JobInfo, consumer string, o Options, batched bool, index int, l *ledger) *coordinator {
	co := &coordinator{
		it: it, job: info.Name, consumer: consumer, index: index, batched: batched, ledger: l, inc: map[string]uint64{},
		m:      info.Options.NumConsumers,
		window: o.PrefetchBatches, retry: roundRetry(o.HeartbeatInterval), log: o.Logger,
		resCh: make(chan roundResult, o.PrefetchBatches),
		ended: map[string]bool{}, expired: map[string]bool{},
		results: map[int64]roundResult{}, fetch: map[string]*fetcher{},
	}
	if r := info.Rounds; r != nil {
		co.look = r.Lookahead
		if v, ok := r.Reached[index]; ok {
			co.next = v // a restarted consumer resumes where its index was
		}
	}
	co.disp.Store(co.next)
	return co
}

// beat renews the lease and reports the round asked up to.
func (co *coordinator) beat() api.JobRequest {
	return api.JobRequest{Job: co.job, Consumer: co.consumer, Report: true, Index: co.index, Round: co.disp.Load()}
}

// run dispatches, collects and delivers rounds until the end of data.
func (co *coordinator) run(ctx context.Context, beats <-chan api.JobInfo) error {
	ctx, cancel := context.WithCancel(ctx)
	defer co.stop(cancel)
	co.it.kickHeartbeat() // its answer carries the schedule: the reads start with it
	for {
		co.dispatch(ctx)
		for {
			r, ok := co.results[co.next]
			if !ok {
				break
			}
			delete(co.results, co.next)
			switch r.kind {
			case roundFail:
				return r.err
			case roundBatch:
				x := co.item(r) // before the fillers: their template
				if err := co.fill(ctx, beats); err != nil {
					return err
				}
				if err := co.deliver(ctx, x, roundDelivered, beats); err != nil {
					return err
				}
			case roundLost:
				if co.ledger != nil {
					co.lost = append(co.lost, r)
				} else {
					co.it.countRound(roundSkipped)
				}
			case roundSkip:
				co.it.countRound(roundSkipped)
			}
			co.next++
		}
		if co.next == co.disp.Load() && co.started {
			if done, anyEnded := roundsEnded(co.sched, co.next, co.ended, co.expired); done && anyEnded {
				for range co.lost { // no batch came after them: no fillers
					co.it.countRound(roundSkipped)
				}
				return io.EOF
			} else if done {
				return fmt.Errorf("job %q: every worker of the rotation is gone", co.job)
			}
		}
		select {
		case r := <-co.resCh:
			co.collect(r)
		case info := <-beats:
			co.apply(info)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop ends the fetchers and waits for them.
func (co *coordinator) stop(cancel context.CancelFunc) {
	cancel()
	for _, f := range co.fetch {
		f.stop()
	}
	// Fetchers may be blocked sending results: drain until they return.
	done := make(chan struct{})
	go func() { co.wg.Wait(); close(done) }()
	for {
		select {
		case <-co.resCh:
		case <-done:
			return
		}
	}
}

// dispatch asks for rounds up to the horizon and the prefetch window.
func (co *coordinator) dispatch(ctx context.Context) {
	for co.started && co.disp.Load() < co.horizon && co.disp.Load() < co.next+int64(co.window) {
		d := co.disp.Load()
		w, err := co.sched.WorkerFor(d)
		if err != nil {
			return // no rotation yet: wait for a heartbeat
		}
		if co.ended[w] {
			co.results[d] = roundResult{round: d, worker: w, kind: roundSkip}
		} else if co.expired[w] {
			co.results[d] = roundResult{round: d, worker: w, kind: roundLost}
		} else if !co.fetcher(ctx, w).ask(d) {
			return // that worker's queue is full; try after a result
		}
		co.disp.Store(d + 1)
		if d+1 >= co.horizon-co.look/2 {
			co.it.kickHeartbeat()
		}
	}
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

// item is a batch's way to Next; the first batch of an exactly-once job
// is the fillers' template, so every filler has the job's tensors (with
// no rows), the fillers before the first batch included.
func (co *coordinator) item(r roundResult) item {
	if co.ledger != nil && co.tmpl == nil {
		e := r.b.Element.Empty()
		co.tmpl = &e
	}
	return item{b: r.b, prov: r.prov, size: r.size, wire: r.wire}
}

// fill delivers the fillers of the lost rounds before a batch.
func (co *coordinator) fill(ctx context.Context, beats <-chan api.JobInfo) error {
	for _, r := range co.lost {
		rh := &api.RoundHeader{Round: r.round, Index: co.index, Bucket: -1, PaddedTokens: make([]int64, co.m), Filler: true}
		b := Batch{Worker: r.worker, Round: rh, batched: co.batched}
		if co.tmpl != nil {
			b.Element = co.tmpl.Empty()
		}
		if err := co.deliver(ctx, item{b: b}, roundFiller, beats); err != nil {
			return err
		}
	}
	co.lost = co.lost[:0]
	return nil
}

// deliver hands a batch to Next, still taking heartbeats meanwhile.
func (co *coordinator) deliver(ctx context.Context, x item, k roundCount, beats <-chan api.JobInfo) error {
	for {
		select {
		case co.it.queue() <- x:
			co.it.countRound(k)
			return nil
		case info := <-beats:
			co.apply(info)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// roundsEnded reports whether every worker that serves a round from next
// on (in the rotation at next or a later one) has ended or is expired, and
// whether any of them ended (rather than all being expired).
func roundsEnded(sched rounds.Schedule, next int64, ended, expired map[string]bool) (done, anyEnded bool) {
	if len(sched.Changes) == 0 {
		return false, false
	}
	ws := sched.RotationAt(next)
	for _, c := range sched.Changes {
		if c.From > next {
			ws = append(ws, c.Workers...)
		}
	}
	for _, w := range ws {
		if !ended[w] && !expired[w] {
			return false, false
		}
		anyEnded = anyEnded || ended[w]
	}
	return true, anyEnded
}

// apply takes a heartbeat's answer: schedule, horizon and expired workers.
func (co *coordinator) apply(info api.JobInfo) {
	if r := info.Rounds; r != nil {
		co.look = r.Lookahead
		if v, ok := r.Reached[co.index]; ok {
			co.sched = rounds.Schedule{Changes: r.Changes}
			co.horizon = max(co.horizon, v+r.Lookahead)
			co.started = true
		}
	}
	for _, w := range info.Workers {
		if w.Expired && !co.expired[w.Name] {
			co.expired[w.Name] = true
			co.drop(w.Name)
		} else if !w.Expired {
			delete(co.expired, w.Name)
		}
		if co.ledger == nil {
			continue
		}
		if prev, ok := co.inc[w.Name]; ok && prev != 0 && prev != w.Incarnation && co.fetch[w.Name] != nil && !w.Expired {
			// A restart: the old process's leases are orphaned until this
			// consumer fences it. Its queued rounds are lost; the next
			// round asked of it starts a new fetcher.
			co.log.Info("worker restarted; fencing its old process", "job", co.job, "worker", w.Name)
			co.drop(w.Name)
		}
		co.inc[w.Name] = w.Incarnation
	}
}

// drop stops reading from worker (expired or restarted) and, for an
// exactly-once job, fences it once nothing more is read from it.
func (co *coordinator) drop(worker string) {
	f := co.fetch[worker]
	if f == nil {
		if co.ledger != nil {
			co.ledger.fence(worker)
		}
		return
	}
	f.fence.Store(true)
	f.stop()
	delete(co.fetch, worker)
}
