package client

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Reading rounds (coordinated reads): one fetcher per worker asks it for
// its rounds in order, one stream per round, and posts each answer to the
// coordinator.

type roundKind int

const (
	roundBatch roundKind = iota
	// roundSkip: a round no consumer gets a batch of (its worker has
	// ended, or was idle when the round was fixed).
	roundSkip
	// roundLost: this consumer's batch of the round will not come (its
	// worker is expired or restarted, or answered skip); other consumers
	// may have theirs. Exactly-once jobs give a filler for it (see
	// coordinated.go); otherwise it is skipped.
	roundLost
	roundEnd
	roundFail
)

type roundResult struct {
	round  int64
	worker string
	kind   roundKind
	b      Batch
	prov   []batch.ProvRange // exactly-once: the batch's elements (a copy)
	size   int64
	wire   int64 // bytes on the stream
	err    error
}

// fetcher asks one worker for its rounds, in order.
type fetcher struct {
	queue  chan int64
	ctx    context.Context
	cancel context.CancelFunc
	// fence (exactly-once): once stopped, the worker is fenced when the
	// fetcher has returned, so every batch it read is in the ledger.
	fence atomic.Bool
}

// ask queues round for the worker; false if its queue is full.
func (f *fetcher) ask(round int64) bool {
	select {
	case f.queue <- round:
		return true
	default:
		return false
	}
}

// stop ends the fetcher: the rounds it still has are skipped.
func (f *fetcher) stop() {
	close(f.queue)
	f.cancel()
}

// fetcher returns the worker's fetcher, starting it on first use.
func (co *coordinator) fetcher(ctx context.Context, w string) *fetcher {
	if f := co.fetch[w]; f != nil {
		return f
	}
	f := &fetcher{queue: make(chan int64, co.window)}
	f.ctx, f.cancel = context.WithCancel(ctx)
	co.fetch[w] = f
	co.wg.Add(1)
	go co.fetchRounds(ctx, w, f)
	return f
}

// fetchRounds asks worker for each queued round, retrying failed streams
// (with the retry policy's delays) until the worker answers or is expired
// (then the round is skipped).
func (co *coordinator) fetchRounds(ctx context.Context, worker string, f *fetcher) {
	defer co.wg.Done()
	defer func() {
		if f.fence.Load() && co.ledger != nil {
			co.ledger.fence(worker)
		}
	}()
	for round := range f.queue {
		r := co.fetchRound(f.ctx, worker, round)
		select {
		case co.resCh <- r:
		case <-ctx.Done():
			return
		}
	}
}

// fetchRound reads one round, trying again while the stream breaks.
func (co *coordinator) fetchRound(ctx context.Context, worker string, round int64) roundResult {
	for fails := 0; ; fails++ {
		if fails > 0 {
			t := time.NewTimer(co.retry.delay(fails))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			return roundResult{round: round, worker: worker, kind: roundLost}
		}
		if fails > 0 {
			co.it.countReconnect()
		}
		if r, retry := co.readRound(ctx, worker, round); !retry {
			return r
		}
	}
}

// readRound asks worker for one round; retry says the stream broke.
func (co *coordinator) readRound(ctx context.Context, worker string, round int64) (res roundResult, retry bool) {
	res = roundResult{round: round, worker: worker}
	addr := co.it.workerAddr(worker)
	if addr == "" {
		return res, true // not heard of yet: a heartbeat will tell
	}
	extra, err := cbor.Marshal(api.RoundRequest{Round: round, Index: co.index})
	if err != nil {
		res.kind, res.err = roundFail, err
		return res, false
	}
	st, err := co.it.openStream(ctx, worker, addr, streamRequest{Window: 1, Extra: extra})
	if err != nil {
		return res, true
	}
	defer st.close()
	h, el, err := st.next(ctx)
	if err != nil {
		switch end, msg := endingOf(err); {
		case end == endOfData:
			res.kind = roundEnd
		case end == endRefused && api.IsRoundIdle(msg):
			res.kind = roundSkip // the same for every consumer: no filler
		case end == endRefused && api.IsRoundSkipped(msg):
			res.kind = roundLost
		case end == endRefused:
			res.kind, res.err = roundFail, workerFailed(co.job, worker, msg, err)
		default:
			return res, true
		}
		return res, false
	}
	var rh api.RoundHeader
	if err := cbor.Unmarshal(h.Extra, &rh); err != nil || rh.Round != round {
		res.kind, res.err = roundFail, fmt.Errorf("job %q: worker %s sent round %d without a valid round header", co.job, worker, round)
		return res, false
	}
	if co.ledger != nil {
		// Received is delivered (receipts.go): recorded now, before the
		// fetcher can return and fence the worker.
		if dup, n := co.ledger.record(h.Prov); dup {
			co.log.Error("exactly-once: a round's batch received before (a bug: please report it)", "job", co.job, "worker", worker, "round", round, "elements", n)
			res.kind = roundLost
			return res, false
		} else if n > 0 {
			co.log.Error("exactly-once: a batch partly received before (a bug: please report it)", "job", co.job, "worker", worker, "round", round, "elements", n)
		}
		res.prov = slices.Clone(h.Prov) // h.Prov is the decoder's, reused
	}
	res.kind = roundBatch
	res.size, res.wire = int64(el.ByteSize()), st.wireBytes()
	res.b = st.batch(h, el, co.batched)
	res.b.Round = &rh
	return res, false
}
