package client

import (
	"context"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/mesh/api"
)

// Reading rounds (coordinated reads): one fetcher per worker asks it for
// its rounds in order, one stream per round, and posts each answer to the
// coordinator.

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
			return roundResult{round: round, worker: worker, kind: roundSkip}
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
		case end == endRefused && api.IsRoundSkipped(msg):
			res.kind = roundSkip
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
	res.kind = roundBatch
	res.size, res.wire = int64(el.ByteSize()), st.wireBytes()
	res.b = st.batch(h, el, co.batched)
	res.b.Round = &rh
	return res, false
}
