package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/tensor"
)

// Element is an ordered set of named tensors (see package tensor).
type Element = tensor.Element

// Split is a unit of source data (see package formats).
type Split = formats.Split

// RegisterMap registers a map function without args under name, so specs
// can name it. Call it before validating or opening specs that use it.
func RegisterMap(name string, f fn.MapFn) { fn.RegisterMap(name, f) }

// RegisterFilter registers a filter function without args under name.
func RegisterFilter(name string, f fn.FilterFn) { fn.RegisterFilter(name, f) }

// Iterator yields a pipeline's elements. Next returns io.EOF at the end;
// any error (io.EOF, a failure, or the end of the ctx passed to Next or
// Open) ends the iteration and is returned again by every later call. Next
// is not safe for concurrent use, and Close must not be called while Next
// runs (cancel the context to interrupt it). Close stops and waits for
// every goroutine the pipeline started.
type Iterator interface {
	Next(ctx context.Context) (Element, error)
	Close() error
	// Stats returns a snapshot of the per-op statistics (empty when
	// statistics are off). It may be called concurrently with Next.
	Stats() Stats
}

// Options tune Open.
type Options struct {
	// DisableStats turns the per-op statistics off. They are cheap (two
	// clock reads and a few atomic adds per element per op); this exists to
	// measure exactly how cheap.
	DisableStats bool
	// Provider, when set, supplies the splits lazily instead of the splits
	// argument (which must then be nil).
	Provider SplitProvider
	// Track makes the iterator account for the provenance of its elements:
	// it then also implements Tracker, which says which source elements
	// each returned element was made of and which splits have entirely
	// left the pipeline. Off, it costs nothing.
	Track bool
	// Tuner sets the parallelism of the maps the spec leaves to the
	// pipeline (`parallelism: auto`, or every map with `autotune: true`);
	// nil: the one registered (RegisterTuner), if any. Cores is the core
	// budget it allocates (nil: GOMAXPROCS), asked at every revision, and
	// TuneInterval the time between revisions (DefaultTuneInterval).
	Tuner        Tuner
	Cores        func() float64
	TuneInterval time.Duration
	// Cache serves the spec's autocache op (autocache.go); nil: the op
	// passes elements through (compute).
	Cache Cache
	// Budget, when not nil, bounds the bytes the pipeline's buffering
	// ops hold (membudget.go): over it, the pipeline fails with a
	// *BudgetError naming the op. nil: no bound.
	Budget *MemoryBudget
}

// Splits enumerates the source's splits, in the deterministic order that
// every node computes identically.
func Splits(spec *Spec) ([]Split, error) {
	c, err := compile(spec, spec.files())
	if err != nil {
		return nil, err
	}
	return c.source.splits()
}

// Open validates spec and starts its pipeline over the given splits, read
// in order (Splits(spec) for the whole dataset). ctx bounds the pipeline's
// lifetime: cancelling it stops everything Open started. The caller must
// Close the iterator.
func Open(ctx context.Context, spec *Spec, splits []Split) (Iterator, error) {
	return OpenWithOptions(ctx, spec, splits, Options{})
}

// OpenWithOptions is Open with options.
func OpenWithOptions(ctx context.Context, spec *Spec, splits []Split, o Options) (Iterator, error) {
	return OpenList(ctx, spec, SplitListOf(slices.Clone(splits)), o)
}

// OpenList is OpenWithOptions over a SplitList, read in ID order: a range
// or synthetic source's splits are computed as the pipeline reaches them,
// so reading a whole large dataset (OFF sharding) does not first build its
// list.
func OpenList(ctx context.Context, spec *Spec, splits SplitList, o Options) (Iterator, error) {
	c, err := compile(spec, spec.files())
	if err != nil {
		return nil, err
	}
	x, err := openCompiled(ctx, c, c.source.open, splits, o)
	if err != nil {
		return nil, err
	}
	if x.p.track != nil {
		return &trackingIter{pipelineIter: x, t: x.p.track}, nil
	}
	return x, nil
}

func openCompiled(ctx context.Context, c *compiled, open sourceOpener, splits SplitList, o Options) (*pipelineIter, error) {
	return openCompiledFrom(ctx, c, open, splits, o, 0, nil)
}

// openCompiledFrom is openCompiled with the stage from (from > 0) made by
// src, given the plan's tracker: a cut pipeline's suffix (OpenSuffix).
func openCompiledFrom(ctx context.Context, c *compiled, open sourceOpener, splits SplitList, o Options, from int, src func(*tracker) iter) (*pipelineIter, error) {
	pctx, cancel := context.WithCancel(ctx)
	p := &plan{
		ctx:      pctx,
		c:        c,
		open:     open,
		splits:   splits,
		provider: o.Provider,
		statsOn:  !o.DisableStats,
		cache:    o.Cache,
		budget:   o.Budget,
		spares:   newSpares(c.ops),
	}
	if o.Track {
		p.track = &tracker{}
	}
	if o.Provider != nil && splits.Len() > 0 {
		cancel()
		return nil, fmt.Errorf("open pipeline: give splits or a split provider, not both")
	}
	p.tune = planTuning(c.spec, c, o)
	p.stats = make([]*opStats, len(c.ops)+1)
	p.stats[0] = &opStats{name: "source:" + c.source.kind}
	p.stats[0].parallelism.Store(1)
	for i, op := range c.ops {
		st := &opStats{name: op.name}
		st.parallelism.Store(1)
		switch tm := p.tune.find(i); {
		case tm != nil:
			tm.st = st
			st.parallelism.Store(int64(tm.gate.limit))
			st.concurrent = true
		case op.op.Map != nil && op.op.Map.Parallelism > 1:
			st.parallelism.Store(int64(op.op.Map.Parallelism))
			st.concurrent = true
		case op.op.Prefetch != nil:
			st.concurrent = true
		}
		p.stats[i+1] = st
	}
	var first iter
	if src != nil {
		p.from, first = from, src(p.track)
	}
	it, err := p.openStageFrom(len(c.ops), 0, &segment{}, true, first)
	if err != nil {
		cancel()
		return nil, err
	}
	if c.spec.Autotune && (len(c.ops) == 0 || c.ops[len(c.ops)-1].op.Prefetch == nil) {
		// autotune: true also overlaps the consumer with the pipeline, as
		// diagnose recommends (a prefetch at the end, outside the
		// statistics: it is no op of the spec).
		it = newPrefetchBudget(pctx, it, DefaultPrefetchBuffer, p.budget.account("autotune's prefetch"))
	}
	x := &pipelineIter{p: p, it: it, cancel: cancel, start: time.Now()}
	if p.tune != nil && p.tune.tuner != nil && p.statsOn {
		x.tuneDone = make(chan struct{})
		go func() {
			defer close(x.tuneDone)
			p.tune.run(pctx, x.Stats)
		}()
	}
	return x, nil
}

// item is an element with its provenance, which random functions and
// shuffles are seeded from.
type item struct {
	el tensor.Element
	// split is the ID of the split the element (or a batch's first
	// element) came from; index its position in that split.
	split, index int64
	// epoch identifies the pass of enclosing repeats (0 on the first), or
	// the job epoch of a ProvidedSplit.
	epoch uint64
	// prov is the element's provenance when tracking (nil when off): the
	// reading of its split, or a batch's members.
	prov *prov
}

// iter is the internal pull interface of every stage.
type iter interface {
	next(ctx context.Context) (item, error)
	close()
}

// plan holds what every stage of one open pipeline shares.
type plan struct {
	ctx      context.Context // cancelled by Close
	c        *compiled
	open     sourceOpener
	splits   SplitList
	provider SplitProvider
	statsOn  bool
	stats    []*opStats    // [0] source, [i+1] ops[i]
	tune     *tuning       // nil unless some map is tuned
	track    *tracker      // nil unless Options.Track
	from     int           // the stage a src given to openStageFrom stands for
	cache    Cache         // Options.Cache
	budget   *MemoryBudget // Options.Budget (nil: none)
	// autocache counts what the autocache op did (nil without one, or
	// without a Cache).
	autocache *autocacheCounters
	// spares are the buffers of batches handed back (Recycle) for the
	// last batch op; nil unless the pipeline ends in batch.
	spares *spares
}

// openStage opens the iterator producing stage k's output (k = 0 is the
// source, k = i+1 is ops[i]) for the given repeat epoch. seg is the timing
// segment the stage belongs to and head whether it is the segment's
// outermost stage (see timed).
func (p *plan) openStage(k int, epoch uint64, seg *segment, head bool) (iter, error) {
	return p.openStageFrom(k, epoch, seg, head, nil)
}

// openStageFrom is openStage with src, when not nil, as stage p.from (0,
// or a suffix's cut): the autocache op runs its prefix over one split at
// a time this way, and a cut pipeline's suffix runs over the prefix's
// elements.
func (p *plan) openStageFrom(k int, epoch uint64, seg *segment, head bool, src iter) (iter, error) {
	var it iter
	if k == p.from && src != nil {
		it = src
	} else if k == 0 && p.provider != nil {
		it = &providerIter{p: p, seg: seg}
	} else if k == 0 {
		s := &sourceIter{p: p, epoch: epoch}
		if p.track != nil {
			s.pass = p.track.passes.Add(1) - 1
		}
		it = s
	} else {
		op := &p.c.ops[k-1]
		st := p.stats[k]
		if op.op.Autocache != nil && p.cache != nil && src == nil {
			a, err := p.newAutocache(k, epoch, seg)
			if err != nil {
				return nil, err
			}
			it = a
		} else if op.op.Repeat != nil {
			count := int64(-1)
			if op.op.Repeat.Count != nil {
				count = *op.op.Repeat.Count
			}
			it = &repeatIter{count: count, reopen: func(pass int64) (iter, error) {
				return p.openStage(k-1, epochOf(epoch, pass), seg, false)
			}}
		} else {
			inSeg, inHead := seg, false
			if op.op.Prefetch != nil || (op.op.Map != nil && op.op.Map.Parallelism > 1) || p.tune.find(k-1) != nil {
				// Its input runs in its own goroutine: a new segment.
				inSeg, inHead = &segment{}, true
			}
			in, err := p.openStageFrom(k-1, epoch, inSeg, inHead, src)
			if err != nil {
				return nil, err
			}
			it, err = p.newOp(k-1, op, st, in, epoch)
			if err != nil {
				in.close()
				return nil, err
			}
		}
	}
	if p.statsOn {
		return &timed{it: it, st: p.stats[k], seg: seg, head: head}, nil
	}
	return it, nil
}

// epochOf derives the epoch of a repeat's pass; pass 0 keeps the outer
// epoch so that repeat(1) changes nothing.
func epochOf(outer uint64, pass int64) uint64 {
	if pass == 0 {
		return outer
	}
	return mix64(outer ^ 0x9e3779b97f4a7c15*uint64(pass))
}

func (p *plan) newOp(i int, op *compiledOp, st *opStats, in iter, epoch uint64) (iter, error) {
	o := op.op
	switch {
	case o.Map != nil:
		m := &mapper{f: op.mapFn, seed: op.seed, name: fmt.Sprintf("ops[%d].%s", i, op.name)}
		if tm := p.tune.find(i); tm != nil {
			return newParallelMap(p.ctx, in, m, tm.max, *o.Map.Deterministic, st, p.statsOn, tm.gate), nil
		}
		if o.Map.Parallelism > 1 {
			return newParallelMap(p.ctx, in, m, o.Map.Parallelism, *o.Map.Deterministic, st, p.statsOn, nil), nil
		}
		return &mapIter{in: in, m: m}, nil
	case o.Filter != nil:
		return &filterIter{in: in, f: op.filter, seed: op.seed, name: fmt.Sprintf("ops[%d].%s", i, op.name)}, nil
	case o.Shuffle != nil:
		s := newShuffle(in, o.Shuffle, epoch)
		s.acct = p.budget.account(fmt.Sprintf("ops[%d].shuffle", i))
		return s, nil
	case o.Batch != nil:
		name := fmt.Sprintf("ops[%d].batch", i)
		return &batchIter{in: in, size: o.Batch.Size, drop: o.Batch.DropRemainder, name: name, acct: p.budget.account(name), spares: p.spares,
			splitLocal: p.c.spec.Order == OrderDeterministic}, nil
	case o.PaddedBatch != nil:
		name := fmt.Sprintf("ops[%d].padded_batch", i)
		return &batchIter{in: in, size: o.PaddedBatch.Size, drop: o.PaddedBatch.DropRemainder, pad: true,
			padValue: o.PaddedBatch.PadValue, name: name, acct: p.budget.account(name),
			splitLocal: p.c.spec.Order == OrderDeterministic}, nil
	case o.BucketBySequenceLength != nil:
		name := fmt.Sprintf("ops[%d].bucket_by_sequence_length", i)
		b, err := newBucketIter(in, o.BucketBySequenceLength, name)
		if err != nil {
			return nil, err
		}
		b.acct = p.budget.account(name)
		return b, nil
	case o.Take != nil:
		return &takeIter{in: in, count: o.Take.Count}, nil
	case o.Skip != nil:
		return &skipIter{in: in, count: o.Skip.Count}, nil
	case o.Prefetch != nil:
		return newPrefetchBudget(p.ctx, in, int(o.Prefetch.Buffer), p.budget.account(fmt.Sprintf("ops[%d].prefetch", i))), nil
	case o.Pack != nil:
		name := fmt.Sprintf("ops[%d].pack", i)
		pk := newPackIter(in, o.Pack, st, name)
		pk.acct = p.budget.account(name)
		return pk, nil
	case o.Autocache != nil:
		return in, nil // no cache: the prefix is computed
	case o.Cost != nil:
		return &costIter{in: in, cpu: time.Duration(o.Cost.CPUMicros) * time.Microsecond, sleep: time.Duration(o.Cost.SleepMicros) * time.Microsecond}, nil
	}
	return nil, fmt.Errorf("ops[%d]: no op", i)
}

// pipelineIter is the Iterator Open returns.
type pipelineIter struct {
	p      *plan
	it     iter
	cancel context.CancelFunc
	start  time.Time

	err       error // sticky: EOF or the first failure
	closeOnce sync.Once
	tuneDone  chan struct{} // closed when the tuner has stopped; nil without one
	mu        sync.Mutex
	end       time.Time // when Next first returned an error, or Close
}

func (x *pipelineIter) Next(ctx context.Context) (Element, error) {
	it, err := x.nextItem(ctx)
	return it.el, err
}

func (x *pipelineIter) nextItem(ctx context.Context) (item, error) {
	if x.err != nil {
		return item{}, x.err
	}
	if err := ctx.Err(); err != nil {
		return item{}, err
	}
	it, err := x.it.next(ctx)
	if err != nil {
		// Every error ends the iteration, the end of ctx included: an op
		// interrupted half-way (a batch half filled, a result slot taken)
		// cannot resume without losing or reordering elements.
		if ctx.Err() != nil && !errors.Is(err, io.EOF) {
			err = ctx.Err()
		}
		x.err = err
		x.mu.Lock()
		x.end = time.Now()
		x.mu.Unlock()
		return item{}, err
	}
	return it, nil
}

func (x *pipelineIter) Close() error {
	x.closeOnce.Do(func() {
		x.cancel()
		if x.tuneDone != nil {
			<-x.tuneDone
		}
		x.it.close()
		x.mu.Lock()
		if x.end.IsZero() {
			x.end = time.Now()
		}
		x.mu.Unlock()
		if x.err == nil {
			x.err = errors.New("pipeline: iterator closed")
		}
	})
	return nil
}

func (x *pipelineIter) Stats() Stats {
	x.mu.Lock()
	end := x.end
	x.mu.Unlock()
	if end.IsZero() {
		end = time.Now()
	}
	return x.p.snapshot(end.Sub(x.start))
}

// sourceIter reads the plan's splits one after another.
type sourceIter struct {
	p     *plan
	epoch uint64
	pass  int64 // the tracking epoch: how many sources were opened before
	i     int
	split Split // the split at i, while cur is open
	cur   formats.Iterator
	index int64
	trk   *splitTrack
}

func (s *sourceIter) next(ctx context.Context) (item, error) {
	for {
		if s.cur == nil {
			if int64(s.i) >= s.p.splits.Len() {
				return item{}, io.EOF
			}
			s.split = s.p.splits.at(int64(s.i))
			cur, err := s.p.open(withEpoch(s.p.ctx, int64(s.epoch)), s.split)
			if err != nil {
				return item{}, fmt.Errorf("source: split %d: %w", s.split.ID, err)
			}
			s.cur, s.index = cur, 0
			if s.p.track != nil {
				s.trk = s.p.track.newSplit(s.pass, s.split.ID)
			}
		}
		el, err := s.cur.Next(ctx)
		if err == nil {
			it := item{el: el, split: s.split.ID, index: s.index, epoch: s.epoch}
			if s.trk != nil {
				it.prov = &s.trk.prov
			}
			s.index++
			if s.trk != nil {
				s.trk.yielded++
			}
			return it, nil
		}
		if !errors.Is(err, io.EOF) {
			return item{}, fmt.Errorf("source: split %d: %w", s.split.ID, err)
		}
		s.closeCur()
		if s.trk != nil {
			s.trk.end()
			s.trk = nil
		}
		s.i++
	}
}

func (s *sourceIter) closeCur() {
	if sk, ok := s.cur.(interface{ Skipped() int64 }); ok {
		s.p.stats[0].skipped.Add(sk.Skipped())
	}
	if rp, ok := s.cur.(interface{ Replaced() int64 }); ok {
		s.p.stats[0].replaced.Add(rp.Replaced())
	}
	s.cur.Close()
	s.cur = nil
}

func (s *sourceIter) close() {
	if s.cur != nil {
		s.closeCur()
	}
}
