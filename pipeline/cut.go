package pipeline

import (
	"context"
	"fmt"
)

// A cut splits a pipeline in two for a partial offload (the client's
// JobOptions.OffloadBoundary, after FastFlow): the nodes run the source
// and ops [0, cut) and ship each element they yield; the consumer runs
// ops [cut, len(Ops)) over those elements (OpenSuffix). Random maps and
// filters are seeded from an element's provenance (epoch, split, index),
// which travels with it, so a cut pipeline yields the same elements as
// the whole one, seeded random ops included.

// MaxCut bounds a cut (the number of ops a pipeline may have before it).
const MaxCut = 1024

// CheckCut reports whether the pipeline can be cut after its first cut
// ops: the prefix must yield single elements (no op of it batches or
// packs), and the suffix must be ops a consumer can run over a stream of
// those elements: not repeat, take or skip (the job's epochs and splits
// are the nodes'), not autocache (its cache lives on the nodes).
func (s *Spec) CheckCut(cut int) error {
	switch {
	case cut < 1 || cut > MaxCut:
		return fmt.Errorf("offload_boundary %d: want 1 up to %d ops before the cut", cut, MaxCut)
	case cut >= len(s.Ops):
		return fmt.Errorf("offload_boundary %d: the pipeline has %d ops; a cut leaves at least one to the consumer (cut points: 1..%d)", cut, len(s.Ops), len(s.Ops)-1)
	}
	for i := range cut {
		op := &s.Ops[i]
		if op.batches() || op.Pack != nil {
			return fmt.Errorf("offload_boundary %d: ops[%d] (%s) comes before the cut and groups elements; the nodes ship single elements, so cut before it", cut, i, opName(op))
		}
	}
	for i := cut; i < len(s.Ops); i++ {
		op := &s.Ops[i]
		if op.Repeat != nil || op.Take != nil || op.Skip != nil || op.Autocache != nil {
			return fmt.Errorf("offload_boundary %d: ops[%d] (%s) comes after the cut but runs only on the nodes (repeat, take, skip and autocache do); cut after it", cut, i, opName(op))
		}
	}
	return nil
}

// Cuts lists the pipeline's valid cut points, in order.
func (s *Spec) Cuts() []int {
	var out []int
	for c := 1; c < len(s.Ops) && c <= MaxCut; c++ {
		if s.CheckCut(c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// Prefix is the pipeline the nodes run for a cut after n ops: the same
// source, seed and first n ops (so their seeds, derived from the op index,
// are the whole pipeline's).
func (s *Spec) Prefix(n int) *Spec {
	p := *s
	p.Ops = append([]Op(nil), s.Ops[:min(n, len(s.Ops))]...)
	return &p
}

func opName(op *Op) string {
	if n := op.names(); len(n) == 1 {
		return n[0]
	}
	return "op"
}

// Dropper is what OpenSuffix's Iterator reports beside Tracker.
type Dropper interface {
	// Dropped returns, and forgets, the input elements the suffix's ops
	// dropped since the last call.
	Dropped() []SplitElements
}

// CutElement is an element of a cut pipeline's prefix with its provenance:
// the job epoch, split and position in the split of the source element it
// was made from.
type CutElement struct {
	Element
	Epoch, Split, Index int64
}

// OpenSuffix runs the ops after spec's first cut over the elements next
// yields (io.EOF ends them), and returns an Iterator that is also a
// Tracker and a Dropper: LastProvenance names the source elements each
// output was made of, Dropped those its ops dropped. next is called from the goroutine that calls Next, or from a
// goroutine the suffix starts (a prefetch, a parallel map) with a context
// Close cancels. The caller must Close the iterator.
func OpenSuffix(ctx context.Context, spec *Spec, cut int, next func(context.Context) (CutElement, error), o Options) (Iterator, error) {
	if err := spec.CheckCut(cut); err != nil {
		return nil, err
	}
	c, err := compile(spec, spec.files())
	if err != nil {
		return nil, err
	}
	o.Track, o.Provider = true, nil
	x, err := openCompiledFrom(ctx, c, c.source.open, SplitList{}, o, cut, func(t *tracker) iter { return &cutSource{pull: next, t: t} })
	if err != nil {
		return nil, err
	}
	return &trackingIter{pipelineIter: x, t: x.p.track}, nil
}

// cutSource is stage cut of a suffix: the prefix's elements, each with
// its provenance. Elements of one split reading share a splitTrack, as a
// source's do, so a batch of consecutive elements names one run; the
// readings of the splits seen last are kept (at most maxCutReadings).
type cutSource struct {
	pull  func(context.Context) (CutElement, error)
	t     *tracker
	reads map[[2]int64]*splitTrack
}

// maxCutReadings bounds cutSource.reads: past it, the map starts afresh
// (elements of a split seen again then get a new reading, which only
// splits a batch's runs in two).
const maxCutReadings = 256

func (s *cutSource) next(ctx context.Context) (item, error) {
	e, err := s.pull(ctx)
	if err != nil {
		return item{}, err
	}
	key := [2]int64{e.Epoch, e.Split}
	trk := s.reads[key]
	if trk == nil {
		if s.reads == nil || len(s.reads) >= maxCutReadings {
			s.reads = make(map[[2]int64]*splitTrack)
		}
		trk = s.t.newSplit(e.Epoch, e.Split)
		trk.cut = true
		s.reads[key] = trk
	}
	trk.yielded++
	return item{el: e.Element, split: e.Split, index: e.Index, epoch: uint64(e.Epoch), prov: &trk.prov}, nil
}

func (s *cutSource) close() {}
