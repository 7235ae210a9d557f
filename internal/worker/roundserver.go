package worker

import (
	"context"
	"fmt"
	"sync"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Coordinated reads on a worker.
//
// Every live worker of a coordinated job runs its pipeline over splits it
// leases DYNAMICally, so workers read disjoint data and no example is read
// twice across workers. The pipeline ends in bucket_by_sequence_length; the
// worker groups its batches into windows of m batches of one bucket
// (roundwindows.go) and keeps up to RoundsAhead complete windows ready.
//
// A consumer asks for (round r, index i) on its own stream (OpenRequest
// Extra: api.RoundRequest). The first request for round r fixes it: the next
// ready window becomes round r's window (or, once the pipeline has ended and
// no window is left, round r and every later round of this worker is the
// end of data). Consumers ask a worker for its rounds in increasing order,
// so the fixed rounds of a worker form a prefix of the rounds it serves,
// and every consumer gets the same answer for the same round: the same
// window (batch i for consumer i), the same end, or the same skip. A round
// at or below the highest fixed round that is no longer held (dropped past
// RoundsHeld, or every batch taken) answers "skip", as does a batch already
// taken by an earlier instance of the consumer: nothing is delivered twice.
// An exactly-once task drops no round (keep: past RoundsHeld rounds with
// batches not taken it fixes no new one), and a round asked for while it
// waits for splits with no window left (idle) is fixed as not served to
// any consumer ("idle": unlike a skip, the same for every consumer).
//
// A consumer asks for a round again only when its stream broke before the
// answer arrived (client/rounds.go), and a batch taken on a stream that
// then broke may never have reached it: the worker cannot tell. So the
// answer an index last took is kept (last), and the same consumer (the
// same iterator: OpenRequest.Consumer) asking for that round again gets
// it again; any other instance of the index gets skip. Without this a
// batch whose stream broke (a QUIC connection lost to an idle timeout
// under load) was skipped on the retry: its elements were lost, even
// under exactly-once, while its worker lived (a dead worker's splits are
// read again, a live one's are not).
//
// roundServer decides those answers; the coordinated task
// (produce_rounds.go) feeds it windows and carries its answers to the
// consumers' streams.

// coordBatch is one bucketed batch waiting for its round.
type coordBatch struct {
	el             pipeline.Element
	tokens, padded int64
	filler         bool
	prov           []batch.ProvRange // exactly-once: the batch's elements
}

// roundSlot is a fixed round's window and which batches are taken; an
// idle slot has no window (the round was fixed while the producer was
// idle) and answers idle to each consumer once.
type roundSlot struct {
	w     bucketing.Window[coordBatch]
	idle  bool
	taken []bool
	left  int
}

// roundServer assigns windows to rounds for one task.
type roundServer struct {
	m       int
	held    int
	windows chan bucketing.Window[coordBatch] // ready windows; closed when production ends
	// keep (exactly-once): a round is never dropped while a batch of it is
	// not taken; once held rounds wait for takers, the next round is fixed
	// only when one of them has been taken completely (room).
	keep bool
	room chan struct{} // capacity 1: a round was taken completely
	// idle is closed while the producer has flushed its windows and waits
	// for splits (exactly-once): a round that would wait for a window is
	// fixed as not served instead. Replaced by an open one when it
	// produces again.
	idle   chan struct{}
	isIdle bool

	assignMu sync.Mutex // one assignment (a wait for a window) at a time

	mu       sync.Mutex
	slots    map[int64]*roundSlot
	last     map[int]lastTake // index → its latest take (at most m answers kept)
	maxFixed int64            // -1: none yet
	endFrom  int64            // first round fixed as the end; -1 while not ended
	err      error            // production's error, set at end
}

// lastTake is the answer an index last took, and who took it.
type lastTake struct {
	round    int64
	consumer string
	a        roundAnswer
}

// newRoundServer serves rounds of m batches, keeps ahead windows ready
// and holds at most held rounds not fully taken.
func newRoundServer(m, ahead, held int) *roundServer {
	return &roundServer{m: m, held: held, windows: make(chan bucketing.Window[coordBatch], ahead),
		room: make(chan struct{}, 1), idle: make(chan struct{}), slots: map[int64]*roundSlot{}, last: map[int]lastTake{}, maxFixed: -1, endFrom: -1}
}

// end records how production ended (err nil: end of data) and closes the
// windows: rounds fixed from then on, once no window is left, are the end.
func (rs *roundServer) end(err error) {
	rs.mu.Lock()
	rs.err = err
	rs.mu.Unlock()
	// After the error, so a request that sees the close sees the error.
	close(rs.windows)
}

// roundAnswer is what a request gets.
type roundAnswer struct {
	b      coordBatch
	bucket int
	padded []int64
	end    bool  // end of data
	skip   bool  // round not served to this consumer
	idle   bool  // round not served to any consumer: the producer was idle
	err    error // production failed
}

// take answers (round, index) for consumer (the asking iterator); it
// blocks while the round waits for a window.
func (rs *roundServer) take(ctx context.Context, round int64, index int, consumer string) roundAnswer {
	if a, ok := rs.lookup(round, index, consumer); ok {
		return a
	}
	rs.mu.Lock()
	far := rs.maxFixed >= 0 && round > rs.maxFixed+int64(rs.held)
	rs.mu.Unlock()
	if far || index < 0 || index >= rs.m {
		// Real consumers ask for this worker's rounds in order, at most a
		// few rotations ahead: a request beyond what the worker may hold
		// (or for an index the job does not have) is refused without
		// taking a window, so it cannot make the worker skip real rounds.
		return roundAnswer{err: fmt.Errorf("round %d index %d is out of range (last round fixed %d, %d held)", round, index, rs.maxFixed, rs.held)}
	}
	rs.assignMu.Lock()
	defer rs.assignMu.Unlock()
	if a, ok := rs.lookup(round, index, consumer); ok {
		return a
	}
	if err := rs.waitForRoom(ctx); err != nil {
		return roundAnswer{err: err}
	}
	var w bucketing.Window[coordBatch]
	var open, none bool
	rs.mu.Lock()
	idle := rs.idle
	rs.mu.Unlock()
	select {
	case w, open = <-rs.windows:
	case <-idle:
		select { // a window that came with the idleness goes first
		case w, open = <-rs.windows:
		default:
			none = true
		}
	case <-ctx.Done():
		return roundAnswer{err: ctx.Err()}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if round <= rs.maxFixed {
		// Impossible while assignMu is held, but never serve a window twice.
		return roundAnswer{skip: true}
	}
	rs.maxFixed = round
	if !open && !none {
		if rs.err != nil {
			return roundAnswer{err: rs.err}
		}
		rs.endFrom = round
		return roundAnswer{end: true}
	}
	// An idle round is held like any other, so that every consumer gets
	// the same answer for it (idle, not a skip of its own).
	s := &roundSlot{w: w, idle: none, taken: make([]bool, rs.m), left: rs.m}
	rs.slots[round] = s
	for len(rs.slots) > rs.held {
		oldest := round
		for r := range rs.slots {
			oldest = min(oldest, r)
		}
		delete(rs.slots, oldest)
	}
	return rs.takeLocked(round, s, index, consumer)
}

// setIdle says whether the producer waits for splits with no window left
// to offer (see idle).
func (rs *roundServer) setIdle(on bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case on && !rs.isIdle:
		close(rs.idle)
	case !on && rs.isIdle:
		rs.idle = make(chan struct{})
	}
	rs.isIdle = on
}

// waitForRoom (keep) waits while held rounds have batches not taken.
// assignMu is held: requests for fixed rounds (lookup) go on meanwhile, and
// their takes make the room.
func (rs *roundServer) waitForRoom(ctx context.Context) error {
	for rs.keep {
		rs.mu.Lock()
		full := len(rs.slots) >= rs.held
		rs.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-rs.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// lookup answers a round already fixed (ok false: it must be assigned).
func (rs *roundServer) lookup(round int64, index int, consumer string) (roundAnswer, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if l, ok := rs.last[index]; ok && consumer != "" && l.consumer == consumer && l.round == round {
		return l.a, true // asked again: the stream that took it broke
	}
	if rs.endFrom >= 0 && round >= rs.endFrom {
		return roundAnswer{end: true}, true
	}
	if s := rs.slots[round]; s != nil {
		return rs.takeLocked(round, s, index, consumer), true
	}
	if round <= rs.maxFixed {
		return roundAnswer{skip: true}, true
	}
	return roundAnswer{}, false
}

func (rs *roundServer) takeLocked(round int64, s *roundSlot, index int, consumer string) roundAnswer {
	if index < 0 || index >= rs.m || s.taken[index] {
		return roundAnswer{skip: true}
	}
	s.taken[index] = true
	if s.left--; s.left == 0 {
		delete(rs.slots, round)
		select {
		case rs.room <- struct{}{}:
		default:
		}
	}
	var a roundAnswer
	if s.idle {
		a = roundAnswer{idle: true}
	} else {
		a = roundAnswer{b: s.w.Batches[index], bucket: s.w.Bucket, padded: make([]int64, rs.m)}
		for i, b := range s.w.Batches {
			a.padded[i] = b.padded
		}
	}
	rs.last[index] = lastTake{round: round, consumer: consumer, a: a}
	return a
}
