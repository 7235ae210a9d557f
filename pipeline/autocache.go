package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/ranges"
)

// Autocache modes (AutocacheOp.Mode).
const (
	AutocacheAuto    = "auto"
	AutocacheCompute = "compute"
	AutocacheCache   = "cache"
)

// AutocachePoint is one autocache op of a spec.
type AutocachePoint struct {
	// Op is the op's index in Spec.Ops; Mode its mode.
	Op   int
	Mode string
	// Prefix is the fingerprint of the pipeline up to the op (its source
	// and the ops before it, with the seeds of random functions made
	// explicit and what does not change the elements left out: prefetch,
	// parallelism). Cache entries are keyed by it and the split.
	Prefix string
}

// AutocachePoints returns the spec's autocache points (at most one: see
// validateAutocachePlacement). The spec must be valid.
func (s *Spec) AutocachePoints() ([]AutocachePoint, error) {
	n, err := s.Normalized()
	if err != nil {
		return nil, err
	}
	var out []AutocachePoint
	for i, op := range n.Ops {
		if op.Autocache == nil {
			continue
		}
		prefix := &Spec{Source: n.Source}
		for j, p := range n.Ops[:i] {
			switch {
			case p.Prefetch != nil:
				continue
			case p.Map != nil:
				m := *p.Map
				m.Seed, m.Parallelism = opSeed(m.Seed, n.Seed, j), 1
				t := true
				m.Deterministic = &t
				p = Op{Map: &m}
			case p.Filter != nil:
				f := *p.Filter
				f.Seed = opSeed(f.Seed, n.Seed, j)
				p = Op{Filter: &f}
			}
			prefix.Ops = append(prefix.Ops, p)
		}
		fp, err := prefix.Fingerprint()
		if err != nil {
			return nil, fmt.Errorf("ops[%d].autocache: prefix: %w", i, err)
		}
		out = append(out, AutocachePoint{Op: i, Mode: op.Autocache.Mode, Prefix: fp})
	}
	return out, nil
}

// validateAutocachePlacement: one autocache op at most, after ops that
// work element by element only, so that what the prefix yields for a split
// depends on that split alone (a cache entry) and every element keeps its
// position in the split (exactly-once delivery counts by it).
func validateAutocachePlacement(ops []Op, add func(path, format string, args ...any)) {
	first := -1
	for i, op := range ops {
		if op.Autocache == nil {
			continue
		}
		if first >= 0 {
			add(fmt.Sprintf("ops[%d].autocache", i), "a second autocache op (ops[%d] is one); a pipeline has at most one", first)
			continue
		}
		first = i
		for j, p := range ops[:i] {
			if p.Map != nil || p.Filter != nil || p.Cost != nil || p.Prefetch != nil || len(p.names()) != 1 {
				continue
			}
			add(fmt.Sprintf("ops[%d].autocache", i), "ops[%d] is a %s: only map, filter, cost and prefetch may come before autocache (each element of a split is cached on its own); put autocache before it", j, p.Name())
			break
		}
	}
}

// Cache is where a pipeline's autocache point puts and gets the prefix's
// output per split (Options.Cache). The mesh's worker implements it over
// its disk cache (package autocache) and the decision recorded in Raft.
type Cache interface {
	// Use reports whether the point reads and fills the cache now (get
	// a cached split, put one that is not), or computes. Asked once per
	// split.
	Use(p AutocachePoint) bool
	// Get opens the cached output of the prefix for split, if held and
	// computed from the input source identifies (the split's version now,
	// formats.SplitVersion): a cached split of another version is not
	// served.
	Get(ctx context.Context, p AutocachePoint, split int64, source string) (CachedSplit, bool)
	// Put starts caching the prefix's output for split, computed from the
	// input source identifies.
	Put(p AutocachePoint, split int64, source string) (CacheWriter, error)
	// Observe reports what computing the prefix over one split took:
	// elements yielded, nanoseconds of the pipeline's time producing them,
	// their bytes (the inputs of the decision).
	Observe(p AutocachePoint, elements, nanos, bytes int64)
}

// CachedSplit reads a cached split: each element with its position in
// the split, io.EOF at the end, or an error (a corrupt file: the elements
// before it were checked; the rest are computed).
type CachedSplit interface {
	Next() (int64, Element, error)
	Close() error
}

// CacheWriter caches a split's prefix output; Commit or Abort ends it.
type CacheWriter interface {
	Add(index int64, el Element) error
	Commit() error
	Abort()
}

// AutocacheStats count what an autocache point did in one pipeline.
type AutocacheStats struct {
	Prefix string `json:"prefix"`
	Mode   string `json:"mode"`
	// Splits read from the cache, computed and put, computed only;
	// Recomputed splits whose cached file failed a check while read
	// (the rest of the split was computed); PutFailed puts given up;
	// Unversioned splits whose input could not be identified
	// (formats.SplitVersion failed): computed, neither got nor put.
	Got         int64 `json:"splits_got"`
	Put         int64 `json:"splits_put"`
	Computed    int64 `json:"splits_computed"`
	Recomputed  int64 `json:"splits_recomputed"`
	PutFailed   int64 `json:"puts_failed"`
	Unversioned int64 `json:"splits_unversioned,omitempty"`
	// Elements the prefix computed, in ComputeSeconds, of Bytes.
	Elements       int64   `json:"elements_computed"`
	ComputeSeconds float64 `json:"compute_seconds"`
	Bytes          int64   `json:"bytes_computed"`
}

type autocacheCounters struct {
	point                                     AutocachePoint
	got, put, computed, recomputed, putFailed atomic.Int64
	unversioned                               atomic.Int64
	elements, nanos, bytes                    atomic.Int64
}

func (c *autocacheCounters) snapshot() *AutocacheStats {
	return &AutocacheStats{Prefix: c.point.Prefix, Mode: c.point.Mode,
		Got: c.got.Load(), Put: c.put.Load(), Computed: c.computed.Load(), Recomputed: c.recomputed.Load(),
		PutFailed: c.putFailed.Load(), Unversioned: c.unversioned.Load(), Elements: c.elements.Load(), ComputeSeconds: float64(c.nanos.Load()) / 1e9, Bytes: c.bytes.Load()}
}

// autocacheIter is stage k, the autocache op (ops[k-1]), when the
// pipeline has a Cache: it takes over the splits (from the provider or the
// list) and makes each one's prefix output either by reading the cache or
// by running the prefix (stages 0..k-1) over that split alone, putting
// what it yields when the cache is in use. Either way the elements carry
// their positions in the split, so a cached split is just another way to
// produce the split's elements (exactly-once delivery is unchanged).
type autocacheIter struct {
	p     *plan
	k     int
	c     *autocacheCounters
	cache Cache
	seg   *segment
	epoch uint64 // list mode: the repeat epoch
	pass  int64  // list mode: the tracking epoch
	i     int    // list mode: next split

	drained  bool
	active   bool
	ps       ProvidedSplit
	tag      uint64 // the items' epoch
	trk      *splitTrack
	rd       CachedSplit
	served   ranges.Set // indices read from rd
	sub      iter
	w        CacheWriter
	n, ns, b int64 // this split's computed elements, nanos, bytes
}

func (p *plan) newAutocache(k int, epoch uint64, seg *segment) (iter, error) {
	pts, err := p.c.spec.AutocachePoints()
	if err != nil {
		return nil, err
	}
	var pt AutocachePoint
	for _, x := range pts {
		if x.Op == k-1 {
			pt = x
		}
	}
	if p.autocache == nil {
		p.autocache = &autocacheCounters{point: pt}
	}
	a := &autocacheIter{p: p, k: k, c: p.autocache, cache: p.cache, seg: seg, epoch: epoch}
	if p.track != nil && p.provider == nil {
		a.pass = p.track.passes.Add(1) - 1
	}
	return a, nil
}

// nextSplit takes the next split; io.EOF when there is none.
func (a *autocacheIter) nextSplit(ctx context.Context) error {
	if a.drained {
		return io.EOF
	}
	var ps ProvidedSplit
	if a.p.provider != nil {
		var err error
		t0 := mono()
		ps, err = a.p.provider.Next(ctx)
		if a.p.statsOn {
			d := mono() - t0
			a.seg.external += d
			a.p.stats[0].splitWaitNanos.Add(d)
		}
		if errors.Is(err, io.EOF) {
			a.drained = true
			return io.EOF
		}
		if err != nil {
			return fmt.Errorf("source: next split: %w", err)
		}
		if err := ps.Exclude.Validate(); err != nil {
			return fmt.Errorf("source: split %d epoch %d: exclude: %w", ps.Split.ID, ps.Epoch, err)
		}
		a.tag = uint64(ps.Epoch)
	} else {
		if int64(a.i) >= a.p.splits.Len() {
			a.drained = true
			return io.EOF
		}
		ps = ProvidedSplit{Split: a.p.splits.at(int64(a.i)), Epoch: a.pass}
		a.i++
		a.tag = a.epoch
	}
	a.ps, a.active, a.served = ps, true, nil
	a.n, a.ns, a.b = 0, 0, 0
	if a.p.track != nil {
		a.trk = a.p.track.newSplit(ps.Epoch, ps.Split.ID)
	}
	use := a.cache.Use(a.c.point)
	var source string
	if use {
		// What the split reads now: a cached split computed from other
		// input (a file rewritten since) is not served, and one whose
		// input cannot be identified is computed, not cached.
		var err error
		if source, err = a.p.splitVersion(ctx, ps.Split); err != nil {
			a.c.unversioned.Add(1)
			use = false
		}
	}
	if use {
		if rd, ok := a.cache.Get(ctx, a.c.point, ps.Split.ID, source); ok {
			a.rd = rd
			a.c.got.Add(1)
			return nil
		}
	}
	var w CacheWriter
	if use && ps.Exclude.Empty() {
		// A split read again without the elements already delivered is
		// not all of it: only whole splits are put.
		if cw, err := a.cache.Put(a.c.point, ps.Split.ID, source); err == nil {
			w = cw
		} else {
			a.c.putFailed.Add(1)
		}
	}
	return a.compute(ps.Exclude, w)
}

// compute runs the prefix over the current split, without the elements
// in exclude, putting what it yields into w (when not nil).
func (a *autocacheIter) compute(exclude ranges.Set, w CacheWriter) error {
	src := &oneSplitSource{p: a.p, split: a.ps.Split, epoch: a.tag, exclude: exclude, trk: a.trk}
	sub, err := a.p.openStageFrom(a.k-1, a.tag, a.seg, false, src)
	if err != nil {
		if w != nil {
			w.Abort()
		}
		return err
	}
	a.sub, a.w = sub, w
	return nil
}

func (a *autocacheIter) next(ctx context.Context) (item, error) {
	for {
		if !a.active {
			if err := a.nextSplit(ctx); err != nil {
				return item{}, err
			}
		}
		if a.rd != nil {
			idx, el, err := a.rd.Next()
			if err == nil {
				if a.ps.Exclude.Contains(idx) {
					continue
				}
				a.served.Add(idx)
				x := item{el: el, split: a.ps.Split.ID, index: idx, epoch: a.tag}
				if a.trk != nil {
					a.trk.yielded++
					x.prov = &a.trk.prov
				}
				return x, nil
			}
			a.rd.Close()
			a.rd = nil
			if errors.Is(err, io.EOF) {
				a.endSplit()
				continue
			}
			// A record failed its check (the cache dropped the file):
			// compute the rest of the split.
			a.c.recomputed.Add(1)
			ex := a.ps.Exclude.Clone()
			ex.AddAll(a.served)
			if err := a.compute(ex, nil); err != nil {
				return item{}, err
			}
			continue
		}
		t0 := mono()
		x, err := a.sub.next(ctx)
		if err == nil {
			a.n++
			a.ns += mono() - t0
			a.b += int64(x.el.ByteSize())
			if a.w != nil {
				if err := a.w.Add(x.index, x.el); err != nil {
					a.w.Abort()
					a.w = nil
					a.c.putFailed.Add(1)
				}
			}
			return x, nil
		}
		if !errors.Is(err, io.EOF) {
			return item{}, err
		}
		a.sub.close()
		a.sub = nil
		switch {
		case a.w != nil:
			if err := a.w.Commit(); err != nil {
				a.c.putFailed.Add(1)
			} else {
				a.c.put.Add(1)
			}
			a.w = nil
		case a.ps.Exclude.Empty() && a.served.Empty():
			a.c.computed.Add(1)
		}
		a.c.elements.Add(a.n)
		a.c.nanos.Add(a.ns)
		a.c.bytes.Add(a.b)
		if a.n > 0 {
			a.cache.Observe(a.c.point, a.n, a.ns, a.b)
		}
		a.endSplit()
	}
}

func (a *autocacheIter) endSplit() {
	if a.trk != nil {
		a.trk.end()
		a.trk = nil
	}
	a.active = false
}

func (a *autocacheIter) close() {
	if a.rd != nil {
		a.rd.Close()
		a.rd = nil
	}
	if a.sub != nil {
		a.sub.close()
		a.sub = nil
	}
	if a.w != nil {
		a.w.Abort()
		a.w = nil
	}
}

// oneSplitSource is the source of a prefix run over one split: it reads
// the split, drops the excluded positions, and counts what it yields on
// the split's tracker (which the autocache iterator owns and ends).
type oneSplitSource struct {
	p       *plan
	split   Split
	epoch   uint64
	exclude ranges.Set
	trk     *splitTrack
	cur     formats.Iterator
	index   int64
	done    bool
}

func (s *oneSplitSource) next(ctx context.Context) (item, error) {
	if s.done {
		return item{}, io.EOF
	}
	if s.cur == nil {
		cur, err := s.p.open(s.p.ctx, s.split)
		if err != nil {
			return item{}, fmt.Errorf("source: split %d: %w", s.split.ID, err)
		}
		s.cur = cur
	}
	for {
		el, err := s.cur.Next(ctx)
		if errors.Is(err, io.EOF) {
			s.done = true
			s.cur.Close()
			s.cur = nil
			return item{}, io.EOF
		}
		if err != nil {
			return item{}, fmt.Errorf("source: split %d: %w", s.split.ID, err)
		}
		i := s.index
		s.index++
		if s.exclude.Contains(i) {
			continue
		}
		x := item{el: el, split: s.split.ID, index: i, epoch: s.epoch}
		if s.trk != nil {
			s.trk.yielded++
			x.prov = &s.trk.prov
		}
		return x, nil
	}
}

func (s *oneSplitSource) close() {
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
}

// splitVersion identifies split s's input as it is now ("" for sources
// the spec alone determines).
func (p *plan) splitVersion(ctx context.Context, s Split) (string, error) {
	if p.c.source == nil || p.c.source.version == nil {
		return "", nil
	}
	return p.c.source.version(ctx, s)
}
