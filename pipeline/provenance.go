package pipeline

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/feedmesh/feedmesh/ranges"
)

// Provenance: with Options.Track, every item carries the source elements
// it was made of, and the pipeline accounts for every element each split
// yields until it leaves the pipeline (returned by Next inside some
// element, or dropped by an op). Exactly-once delivery is built on this:
// what was delivered is excluded when a split is read again
// (ProvidedSplit.Exclude), and a split whose elements have all left can be
// acknowledged.
//
// The cost when tracking is off is one nil pointer more per item and a nil
// check where the source yields, an op drops an element or a batch is
// assembled.

// Tracker reports provenance. Its methods are called from the goroutine
// that calls Next. The Iterator that OpenWithOptions returns implements it
// when Options.Track is set.
type Tracker interface {
	// LastProvenance is the provenance of the element last returned by
	// Next: the source elements it was made of, grouped by (Epoch, Split),
	// sorted by epoch then split. Valid until the next call to Next.
	LastProvenance() []SplitElements
	// Completed returns, and forgets, the splits whose reading has ended
	// (the source moved to the next split, or the provider said io.EOF)
	// and all of whose read elements have left the pipeline: returned by
	// Next (inside an element) or dropped by an op. In the order they
	// completed.
	Completed() []CompletedSplit
}

// SplitElements are elements of one split read in one epoch.
type SplitElements struct {
	// Epoch is the ProvidedSplit's Epoch; over a fixed split list (Open),
	// the number of times the source was opened before (the repeat pass,
	// counting the passes of nested repeats in order).
	Epoch, Split int64
	// Indices are positions in the split as the source yields them
	// (0-based, counting excluded positions).
	Indices ranges.Set
}

// CompletedSplit is a split all of whose read elements have left the
// pipeline.
type CompletedSplit struct {
	Epoch, Split int64
	// Emitted are the indices that were returned by Next (within some
	// element); Read is how many elements the source yielded (excluded ones
	// not counted), Dropped how many an op dropped. Read = Emitted.Len() +
	// Dropped.
	Emitted       ranges.Set
	Read, Dropped int64
}

// tracker is the bookkeeping of one tracked pipeline. Sources (which may
// run on a prefetch or parallel map goroutine), dropping ops and Next all
// update it, under mu.
type tracker struct {
	mu        sync.Mutex
	completed []CompletedSplit
	seq       atomic.Int64 // numbers splitTracks, to order equal keys
	passes    atomic.Int64 // source opens over a fixed split list
	// cutDropped are the elements of cut readings (a suffix's input,
	// OpenSuffix) that an op dropped, until Dropped takes them.
	cutDropped []SplitElements
}

// splitTrack accounts for one reading of one split. Items point at it, so
// two readings of a split id (two epochs, or a split listed twice) never
// mix. The source alone writes yielded; the fields below mu are written
// under tracker.mu.
type splitTrack struct {
	prov         prov // {self, nil}: what its elements point at
	t            *tracker
	epoch, split int64
	seq          int64
	yielded      int64 // source goroutine only

	ended   bool  // reading has ended; read is final
	read    int64 // = yielded once ended
	left    int64 // emitted or dropped
	dropped int64
	emitted ranges.Set
	done    bool
	cut     bool // a suffix's input: dropItem lists what it drops
}

func (t *tracker) newSplit(epoch, split int64) *splitTrack {
	s := &splitTrack{t: t, epoch: epoch, split: split, seq: t.seq.Add(1)}
	s.prov.trk = s
	return s
}

// end records that the source has read the whole split.
func (s *splitTrack) end() {
	s.t.mu.Lock()
	s.ended, s.read = true, s.yielded
	s.checkLocked()
	s.t.mu.Unlock()
}

// checkLocked moves the split to the completed list once every element it
// yielded has left.
func (s *splitTrack) checkLocked() {
	if s.done || !s.ended || s.left != s.read {
		return
	}
	s.done = true
	s.t.completed = append(s.t.completed, CompletedSplit{Epoch: s.epoch, Split: s.split,
		Emitted: s.emitted, Read: s.read, Dropped: s.dropped})
	s.emitted = nil
}

// prov is a tracked item's provenance. An element from the source points
// at its split reading's own prov (members nil: the element is its own
// provenance, item.index its position); a batch at a prov of its own.
type prov struct {
	trk     *splitTrack
	members []member
}

// member is a run of source elements inside a tracked batch: positions
// [lo, hi) of one split reading. A batch of consecutive elements, the
// usual case, holds one run per split it spans, not one entry per element.
type member struct {
	trk    *splitTrack
	lo, hi int64
}

// appendRun appends m to dst, extending dst's last run when m continues
// it.
func appendRun(dst []member, m member) []member {
	if n := len(dst); n > 0 && dst[n-1].trk == m.trk && dst[n-1].hi == m.lo {
		dst[n-1].hi = m.hi
		return dst
	}
	return append(dst, m)
}

// appendMembers appends the source elements x was made of to dst.
func (x *item) appendMembers(dst []member) []member {
	if x.prov.members == nil {
		return appendRun(dst, member{x.prov.trk, x.index, x.index + 1})
	}
	for _, m := range x.prov.members {
		dst = appendRun(dst, m)
	}
	return dst
}

// dropItem records that an op dropped x (an element or a batch) for good.
// It costs a nil check when tracking is off.
func dropItem(x *item) {
	if x.prov == nil {
		return
	}
	t := x.prov.trk.t
	t.mu.Lock()
	if x.prov.members == nil {
		trk := x.prov.trk
		trk.left++
		trk.dropped++
		trk.checkLocked()
		if trk.cut {
			t.noteCutDrop(trk, x.index, x.index+1)
		}
	} else {
		for _, m := range x.prov.members {
			m.trk.left += m.hi - m.lo
			m.trk.dropped += m.hi - m.lo
			m.trk.checkLocked()
			if m.trk.cut {
				t.noteCutDrop(m.trk, m.lo, m.hi)
			}
		}
	}
	t.mu.Unlock()
}

// maxCutDropped bounds tracker.cutDropped between two takes: a filter
// after a cut that drops a long run of elements, interleaved from many
// splits, before the suffix emits anything would grow it without limit.
// Drops past it are not listed: a consumer then does not count them as
// handled, and a resume reads them again (and drops them again).
const maxCutDropped = 4096

// noteCutDrop lists the dropped positions [lo, hi) of cut reading trk,
// extending the last entry when they continue it (t.mu held).
func (t *tracker) noteCutDrop(trk *splitTrack, lo, hi int64) {
	if n := len(t.cutDropped); n > 0 {
		if l := &t.cutDropped[n-1]; l.Epoch == trk.epoch && l.Split == trk.split && len(l.Indices) == 2 && l.Indices[1] == lo {
			l.Indices[1] = hi
			return
		}
	}
	if len(t.cutDropped) < maxCutDropped {
		t.cutDropped = append(t.cutDropped, SplitElements{Epoch: trk.epoch, Split: trk.split, Indices: ranges.Set{lo, hi}})
	}
}

// batchProv gives a batch assembled from items the union of their
// provenance (nothing when tracking is off). One allocation per batch: the
// prov and room for its first runs (a batch spans one or two splits in the
// usual case).
func batchProv(items []item) *prov {
	if items[0].prov == nil {
		return nil
	}
	b := &provBox{}
	ms := b.runs[:0]
	for i := range items {
		ms = items[i].appendMembers(ms)
	}
	b.p = prov{trk: items[0].prov.trk, members: slices.Clip(ms)}
	return &b.p
}

// provBox is a batch's prov with inline room for its runs.
type provBox struct {
	p    prov
	runs [2]member
}

// trackingIter is the Iterator OpenWithOptions returns with Track.
type trackingIter struct {
	*pipelineIter
	t       *tracker
	last    []SplitElements
	scratch []member
	// out and idx back last (valid until the next Next), reused from one
	// element to the next so that emitting allocates nothing.
	out []SplitElements
	idx []int64
}

var _ Tracker = (*trackingIter)(nil)

func (x *trackingIter) Next(ctx context.Context) (Element, error) {
	x.last = nil
	it, err := x.nextItem(ctx)
	if err != nil {
		return Element{}, err
	}
	x.last = x.emit(&it)
	return it.el, nil
}

// byPosition orders runs by (epoch, split, reading, first index).
func byPosition(a, b member) int {
	if c := cmp.Compare(a.trk.epoch, b.trk.epoch); c != 0 {
		return c
	}
	if c := cmp.Compare(a.trk.split, b.trk.split); c != 0 {
		return c
	}
	if c := cmp.Compare(a.trk.seq, b.trk.seq); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

// emit records x as returned by Next and returns its provenance, in
// buffers reused by the next call.
func (x *trackingIter) emit(it *item) []SplitElements {
	ms := it.appendMembers(x.scratch[:0])
	if len(ms) > 1 && !slices.IsSortedFunc(ms, byPosition) {
		slices.SortFunc(ms, byPosition)
	}
	out, idx := x.out[:0], x.idx[:0]
	x.t.mu.Lock()
	for i := 0; i < len(ms); {
		trk := ms[i].trk
		start := len(idx)
		var n int64
		j := i
		for ; j < len(ms) && ms[j].trk == trk; j++ {
			// Sorted and disjoint: append, merging a run that touches the
			// one before.
			lo, hi := ms[j].lo, ms[j].hi
			if k := len(idx); k > start && idx[k-1] >= lo {
				idx[k-1] = max(idx[k-1], hi)
			} else {
				idx = append(idx, lo, hi)
			}
			n += hi - lo
		}
		r := ranges.Set(idx[start:len(idx):len(idx)])
		out = append(out, SplitElements{Epoch: trk.epoch, Split: trk.split, Indices: r})
		trk.emitted.AddAll(r)
		trk.left += n
		trk.checkLocked()
		i = j
	}
	x.t.mu.Unlock()
	clear(ms)
	x.scratch = ms[:0]
	clear(out[len(out):cap(out)]) // drop references to old readings
	x.out, x.idx = out, idx
	return out
}

func (x *trackingIter) LastProvenance() []SplitElements { return x.last }

// Dropped returns, and forgets, the elements of a suffix's input
// (OpenSuffix) that its ops dropped (a filter's rejects), a run of
// positions per entry, in the order they were dropped (at most
// maxCutDropped entries between two calls); nil for other pipelines. A consumer counts them as handled, like those it returned.
func (x *trackingIter) Dropped() []SplitElements { return take(&x.t.mu, &x.t.cutDropped) }

func (x *trackingIter) Completed() []CompletedSplit { return take(&x.t.mu, &x.t.completed) }

// take returns *list and empties it, under mu.
func take[T any](mu *sync.Mutex, list *[]T) []T {
	mu.Lock()
	defer mu.Unlock()
	l := *list
	*list = nil
	return l
}
