package pipeline

import (
	"errors"
	"fmt"
)

// Take and skip over an epoch's order.
//
// In a pipeline that one process runs, take and skip count the elements
// that reach them. A DYNAMIC job's workers each run the pipeline over the
// splits they lease, so counted there, take and skip would count per
// worker. A DYNAMIC job takes and skips over the epoch's order instead:
// the elements of the splits in split order (split ID ascending), each
// split's in their order in the split (their index in it). `skip: M`
// then `take: N` select the elements at positions [M, M+N) of that order,
// whichever worker reads them, and whatever worker dies.
//
// The nodes can only select those positions when they know where each
// split starts in the epoch's order before reading it, and when the ops
// before the take or skip keep every element (positions in the source are
// positions at the take). FoldTakeSkip applies the take and skip ops to
// the source then: a range source's start and stop. Every other case says
// why it cannot (ErrTakeSkipPerWorker).

// ErrTakeSkipPerWorker marks a spec whose take or skip the nodes cannot
// apply to the epoch's order (FoldTakeSkip says why): run by workers,
// they would count per worker pipeline.
var ErrTakeSkipPerWorker = errors.New("take/skip would count per worker")

// keepsEach reports whether op yields exactly one element per element it
// takes, in a position the source's order fixes: what may come before a
// take or skip that FoldTakeSkip applies to the source.
func keepsEach(op *Op) bool {
	return op.Map != nil || op.Cost != nil || op.Autocache != nil || op.Prefetch != nil
}

// HasTakeSkip reports whether the spec has a take or a skip op.
func (s *Spec) HasTakeSkip() bool {
	for i := range s.Ops {
		if s.Ops[i].Take != nil || s.Ops[i].Skip != nil {
			return true
		}
	}
	return false
}

// FoldTakeSkip returns the spec with its take and skip ops applied to its
// source, and true: the same elements, selected before they are read
// (see above). A spec without take or skip is returned as it is, with
// false. A spec whose take or skip cannot be applied to the source is an
// error wrapping ErrTakeSkipPerWorker that says why.
func (s *Spec) FoldTakeSkip() (*Spec, bool, error) {
	if !s.HasTakeSkip() {
		return s, false, nil
	}
	var lo, hi int64 = 0, -1 // positions [lo, hi) of the source; hi < 0: its end
	var ops []Op
	last := -1
	for i := range s.Ops {
		op := &s.Ops[i]
		switch {
		case op.Skip != nil:
			lo = satAdd(lo, op.Skip.Count)
			last = i
		case op.Take != nil:
			if end := satAdd(lo, op.Take.Count); hi < 0 || end < hi {
				hi = end
			}
			last = i
		}
	}
	for i := range s.Ops {
		op := &s.Ops[i]
		if op.Take != nil || op.Skip != nil {
			continue
		}
		if i < last && !keepsEach(op) {
			return s, false, fmt.Errorf("%w: op %d (%s) comes before a take or skip and does not keep each element (only map, cost, autocache and prefetch may): move the take or skip before it", ErrTakeSkipPerWorker, i, opName(op))
		}
		ops = append(ops, *op)
	}
	if s.Source.Range == nil {
		return s, false, fmt.Errorf("%w: the nodes know where each split starts in the epoch's order only for a range source (a file's records are counted when it is read)", ErrTakeSkipPerWorker)
	}
	if hi >= 0 && hi < lo {
		hi = lo
	}
	out := *s
	out.Ops = ops
	r := *s.Source.Range
	n := rangeOptions(&r).Count()
	step := rangeOptions(&r).WithDefaults().Step
	// Values by position in uint64, two's complement: position p < n is
	// the value Start + p·Step, which int64 holds.
	at := func(p int64) int64 { return int64(uint64(r.Start) + uint64(p)*uint64(step)) }
	switch {
	case lo >= n:
		r.Stop = r.Start
	case hi >= 0 && hi < n:
		r.Start, r.Stop = at(lo), at(hi)
	default:
		r.Start = at(lo)
	}
	r.Step = step
	out.Source.Range = &r
	return &out, true, nil
}

// TakeSkipBefore is how many take and skip ops come before op i: what
// FoldTakeSkip removes ahead of it (an op index, such as a cut, moves back
// by that much in the folded spec).
func (s *Spec) TakeSkipBefore(i int) int {
	n := 0
	for j := range s.Ops[:min(max(i, 0), len(s.Ops))] {
		if s.Ops[j].Take != nil || s.Ops[j].Skip != nil {
			n++
		}
	}
	return n
}

// satAdd is a+b for counts (non-negative), saturating.
func satAdd(a, b int64) int64 {
	if b > 0 && a > (1<<63-1)-b {
		return 1<<63 - 1
	}
	return a + b
}
