package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/bucketing"
	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/tensor"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Coordinated reads on a worker.
//
// Every live worker of a coordinated job runs its pipeline over splits it
// leases DYNAMICally, so workers read disjoint data and no example is read
// twice across workers. The pipeline ends in bucket_by_sequence_length; the
// worker groups its batches into windows of m batches of one bucket
// (bucketing.Grouper) and keeps up to RoundsAhead complete windows ready.
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

// Defaults of WorkerConfig.RoundsAhead and RoundsHeld.
const (
	DefaultRoundsAhead = 4
	DefaultRoundsHeld  = 512
)

// coordBatch is one bucketed batch waiting for its round.
type coordBatch struct {
	el             pipeline.Element
	tokens, padded int64
	filler         bool
}

// roundSlot is a fixed round's window and which batches are taken.
type roundSlot struct {
	w     bucketing.Window[coordBatch]
	taken []bool
	left  int
}

// roundServer assigns windows to rounds for one task.
type roundServer struct {
	m          int
	held       int
	lengthName string
	boundaries []int64
	pad        bool
	windows    chan bucketing.Window[coordBatch] // closed when production ends

	assignMu sync.Mutex // one assignment (a wait for a window) at a time

	mu       sync.Mutex
	slots    map[int64]*roundSlot
	maxFixed int64 // -1: none yet
	endFrom  int64 // first round fixed as the end; -1 while not ended
	err      error // production's error, set at finish
}

// coordinatedOp returns the bucket op a coordinated spec ends in, or an
// error that says what to change.
func coordinatedOp(spec *pipeline.Spec) (*pipeline.BucketOp, error) {
	if len(spec.Ops) == 0 || spec.Ops[len(spec.Ops)-1].BucketBySequenceLength == nil {
		return nil, errors.New("coordinated: the dataset spec must end in bucket_by_sequence_length (rounds group batches of one bucket)")
	}
	return spec.Ops[len(spec.Ops)-1].BucketBySequenceLength, nil
}

func newRoundServer(cfg WorkerConfig, job api.JobInfo, spec *pipeline.Spec) (*roundServer, error) {
	op, err := coordinatedOp(spec)
	if err != nil {
		return nil, err
	}
	m := job.Options.NumConsumers
	if m < 1 {
		return nil, fmt.Errorf("coordinated: num_consumers %d: must be >= 1", m)
	}
	ahead, held := cfg.RoundsAhead, cfg.RoundsHeld
	if ahead <= 0 {
		ahead = DefaultRoundsAhead
	}
	if held <= 0 {
		held = DefaultRoundsHeld
	}
	return &roundServer{m: m, held: held, lengthName: tensor.LengthsName(op.Tensor), boundaries: op.Boundaries,
		pad: job.Options.PadFinalRound, windows: make(chan bucketing.Window[coordBatch], ahead),
		slots: map[int64]*roundSlot{}, maxFixed: -1, endFrom: -1}, nil
}

// finish records how production ended; windows is closed by the producer.
func (rs *roundServer) finish(err error) {
	rs.mu.Lock()
	rs.err = err
	rs.mu.Unlock()
}

// roundAnswer is what a request gets.
type roundAnswer struct {
	b      coordBatch
	bucket int
	padded []int64
	end    bool  // end of data
	skip   bool  // round not served
	err    error // production failed
}

// take answers (round, index); it blocks while the round waits for a
// window.
func (rs *roundServer) take(ctx context.Context, round int64, index int) roundAnswer {
	if a, ok := rs.lookup(round, index); ok {
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
	if a, ok := rs.lookup(round, index); ok {
		return a
	}
	var w bucketing.Window[coordBatch]
	var open bool
	select {
	case w, open = <-rs.windows:
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
	if !open {
		if rs.err != nil {
			return roundAnswer{err: rs.err}
		}
		rs.endFrom = round
		return roundAnswer{end: true}
	}
	s := &roundSlot{w: w, taken: make([]bool, rs.m), left: rs.m}
	rs.slots[round] = s
	for len(rs.slots) > rs.held {
		oldest := round
		for r := range rs.slots {
			oldest = min(oldest, r)
		}
		delete(rs.slots, oldest)
	}
	return rs.takeLocked(round, s, index)
}

// lookup answers a round already fixed (ok false: it must be assigned).
func (rs *roundServer) lookup(round int64, index int) (roundAnswer, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.endFrom >= 0 && round >= rs.endFrom {
		return roundAnswer{end: true}, true
	}
	if s := rs.slots[round]; s != nil {
		return rs.takeLocked(round, s, index), true
	}
	if round <= rs.maxFixed {
		return roundAnswer{skip: true}, true
	}
	return roundAnswer{}, false
}

func (rs *roundServer) takeLocked(round int64, s *roundSlot, index int) roundAnswer {
	if index < 0 || index >= rs.m || s.taken[index] {
		return roundAnswer{skip: true}
	}
	s.taken[index] = true
	if s.left--; s.left == 0 {
		delete(rs.slots, round)
	}
	a := roundAnswer{b: s.w.Batches[index], bucket: s.w.Bucket, padded: make([]int64, rs.m)}
	for i, b := range s.w.Batches {
		a.padded[i] = b.padded
	}
	return a
}

// produceWindows runs the pipeline over DYNAMIC leases, groups its batches
// into windows and queues them; at the end it flushes the partial windows
// (padded or dropped as the job says) and closes the queue.
func (t *task) produceWindows() error {
	err := t.groupWindows()
	t.rounds.finish(err) // before the close, so a request that sees it sees the error
	close(t.rounds.windows)
	return err
}

func (t *task) groupWindows() error {
	rs := t.rounds
	p := newLeaseProvider(t.ctx, t.w.n, t.job.Name, t.splits)
	defer p.close()
	it, err := pipeline.OpenWithOptions(t.ctx, t.spec, nil, pipeline.Options{Provider: p})
	if err != nil {
		return err
	}
	defer it.Close()
	// (m-1) batches per bucket never block the grouper.
	g, err := bucketing.NewGrouper[coordBatch](rs.m, (rs.m-1)*(len(rs.boundaries)+1))
	if err != nil {
		return err
	}
	templates := map[int]pipeline.Element{}
	for {
		el, err := it.Next(t.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		b, bucket, err := rs.measure(el)
		if err != nil {
			return err
		}
		if _, ok := templates[bucket]; !ok {
			templates[bucket] = el
		}
		t.w.countEncoded(el)
		w, ok, err := g.Add(bucket, b)
		if err != nil {
			return err
		}
		if ok {
			if err := t.queueWindow(w); err != nil {
				return err
			}
		}
	}
	pad := func(bucket int) coordBatch {
		return coordBatch{el: emptyLike(templates[bucket]), filler: true}
	}
	for _, w := range g.Flush(pad, !rs.pad) {
		if err := t.queueWindow(w); err != nil {
			return err
		}
	}
	return nil
}

func (t *task) queueWindow(w bucketing.Window[coordBatch]) error {
	poll := time.NewTicker(t.w.n.cfg.Worker.JobPollInterval)
	defer poll.Stop()
	for {
		select {
		case t.rounds.windows <- w:
			t.produced.Add(int64(len(w.Batches)))
			return nil
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-poll.C:
			if t.jobGone() {
				t.cancel()
			}
		}
	}
}

// measure finds a batch's bucket and token counts from its lengths tensor.
func (rs *roundServer) measure(el pipeline.Element) (coordBatch, int, error) {
	lt, ok := el.Get(rs.lengthName)
	if !ok {
		return coordBatch{}, 0, fmt.Errorf("coordinated: batch has no %q tensor (is bucket_by_sequence_length the last op?)", rs.lengthName)
	}
	ls, err := lt.Int32s()
	if err != nil {
		return coordBatch{}, 0, fmt.Errorf("coordinated: %s: %w", rs.lengthName, err)
	}
	lens := make([]int64, len(ls))
	var tokens int64
	for i, l := range ls {
		lens[i] = int64(max(l, 0))
		tokens += lens[i]
	}
	var longest int64
	for _, l := range lens {
		longest = max(longest, l)
	}
	return coordBatch{el: el, tokens: tokens, padded: bucketing.PaddedTokens(lens)}, bucketing.Index(longest, rs.boundaries), nil
}

// emptyLike returns a batch of the template's tensors with zero rows: the
// filler of a padded-out final window.
func emptyLike(tmpl pipeline.Element) pipeline.Element {
	var out pipeline.Element
	for _, t := range tmpl.Tensors {
		shape := append([]int64(nil), t.Shape...)
		if len(shape) > 0 {
			shape[0] = 0
		}
		e := tensor.Tensor{Name: t.Name, DType: t.DType, Shape: shape, Data: []byte{}}
		if t.DType == tensor.Bytes {
			e.Offsets = []int64{0}
		}
		out.Tensors = append(out.Tensors, e)
	}
	return out
}

// serveRound answers one coordinated request on its own stream: one batch
// then the end, a clean end (end of data), or an end that says skip.
func (t *task) serveRound(ctx context.Context, s *batch.Sender, extra cbor.RawMessage) {
	var req api.RoundRequest
	if len(extra) == 0 || cbor.Unmarshal(extra, &req) != nil || req.Round < 0 {
		s.End(errors.New("coordinated: the request must carry a round and a consumer index"))
		return
	}
	a := t.rounds.take(ctx, req.Round, req.Index)
	switch {
	case a.err != nil && (ctx.Err() != nil || t.ctx.Err() != nil):
		// The node is closing: not the job's failure. The stream just
		// closes; the consumer retries, and skips the round once this
		// worker is expired.
		return
	case a.err != nil:
		s.End(a.err)
		return
	case a.end:
		s.End(nil)
		return
	case a.skip:
		s.End(fmt.Errorf("%s: round %d, index %d", api.RoundSkipped, req.Round, req.Index))
		return
	}
	rh := api.RoundHeader{Round: req.Round, Index: req.Index, Bucket: a.bucket, PaddedTokens: a.padded, Tokens: a.b.tokens, Filler: a.b.filler}
	raw, err := cbor.Marshal(rh)
	if err != nil {
		s.End(err)
		return
	}
	h := batch.Header{Seq: uint64(req.Round), Worker: t.w.n.name, Extra: raw}
	f, err := t.w.n.encodeBatch(h, a.b.el)
	if err != nil {
		s.End(fmt.Errorf("encode batch: %w", err))
		return
	}
	if err := s.Send(ctx, f); err != nil {
		t.w.n.log.Debug("coordinated consumer stream ended", "job", t.job.Name, "round", req.Round, "err", err)
		return
	}
	s.End(nil)
}
