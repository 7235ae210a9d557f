package formats

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/tensor"
)

// RangeOptions configure the range source: one element per value start,
// start+step, … up to but excluding stop (like Python's range), each with
// the int64 scalar tensor "value".
type RangeOptions struct {
	Start, Stop int64
	// Step between values; 0 means 1. Negative steps count down.
	Step int64
	// SplitSize is the number of values per split; 0 puts everything in one
	// split.
	SplitSize int64
}

// WithDefaults returns o with zero fields replaced by their defaults, the
// form that specs are fingerprinted in.
func (o RangeOptions) WithDefaults() RangeOptions {
	if o.Step == 0 {
		o.Step = 1
	}
	return o
}

// Validate checks the options; messages name the field.
func (o RangeOptions) Validate() error {
	if o.SplitSize < 0 {
		return errors.New("split_size: must be >= 0 (0: one split)")
	}
	return nil
}

// Count is the number of values of the range.
func (o RangeOptions) Count() int64 { return o.count() }

// count is the number of values of the range.
func (o RangeOptions) count() int64 {
	o = o.WithDefaults()
	// Work in uint64 so ranges spanning most of int64 do not overflow.
	switch {
	case o.Step > 0 && o.Stop > o.Start:
		span := uint64(o.Stop) - uint64(o.Start)
		return int64((span-1)/uint64(o.Step) + 1)
	case o.Step < 0 && o.Stop < o.Start:
		span := uint64(o.Start) - uint64(o.Stop)
		return int64((span-1)/uint64(-o.Step) + 1)
	}
	return 0
}

// RangeSplits enumerates the range's splits: index ranges [Start, End) of
// SplitSize values (the last may be shorter), ID = position. An empty range
// has no splits.
func RangeSplits(o RangeOptions) ([]Split, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("range source: %w", err)
	}
	ss, err := indexSplits(o.count(), o.SplitSize)
	if err != nil {
		return nil, fmt.Errorf("range source: %w", err)
	}
	return ss, nil
}

// MaxIndexSplits bounds how many splits an index source (range, synthetic)
// may enumerate: every node holds the list in memory.
const MaxIndexSplits = 1 << 22

// indexSplits cuts [0, n) into splits of size (0: one split).
func indexSplits(n, size int64) ([]Split, error) {
	x, err := newIndexSplitter(n, size)
	if err != nil || x.Len() == 0 {
		return nil, err
	}
	out := make([]Split, x.Len())
	for i := range out {
		out[i] = x.At(int64(i))
	}
	return out, nil
}

// IndexSplitter is an index source's split list (RangeSplits,
// SyntheticSplits) computed on demand: split i is the index range
// [i·Size, min((i+1)·Size, N)), ID i. A node serving a job needs a split
// by ID, not the list: 16 M elements in splits of 64 make a 10 MiB list,
// built and held by every worker of every job.
type IndexSplitter struct {
	N, Size int64 // elements, and elements per split (> 0 when N > 0)
}

// newIndexSplitter checks what indexSplits checks.
func newIndexSplitter(n, size int64) (IndexSplitter, error) {
	if n <= 0 {
		return IndexSplitter{}, nil
	}
	if size <= 0 || size > n {
		size = n
	}
	if k := (n + size - 1) / size; k > MaxIndexSplits {
		return IndexSplitter{}, fmt.Errorf("%d elements in splits of %d make %d splits, over the limit of %d: raise split_size", n, size, k, MaxIndexSplits)
	}
	return IndexSplitter{N: n, Size: size}, nil
}

// Len is how many splits there are.
func (x IndexSplitter) Len() int64 {
	if x.N <= 0 {
		return 0
	}
	return (x.N + x.Size - 1) / x.Size
}

// At is split id, for 0 <= id < Len().
func (x IndexSplitter) At(id int64) Split {
	start := id * x.Size
	return Split{ID: id, Start: start, End: min(start+x.Size, x.N)}
}

// RangeSplitter is RangeSplits computed on demand.
func RangeSplitter(o RangeOptions) (IndexSplitter, error) {
	if err := o.Validate(); err != nil {
		return IndexSplitter{}, fmt.Errorf("range source: %w", err)
	}
	x, err := newIndexSplitter(o.count(), o.SplitSize)
	if err != nil {
		return IndexSplitter{}, fmt.Errorf("range source: %w", err)
	}
	return x, nil
}

// checkIndexSplit validates an index split against a source of n elements.
func checkIndexSplit(s Split, n int64) (start, end int64, err error) {
	start, end = s.Start, s.End
	if end == -1 {
		end = n
	}
	if start < 0 || end < start || end > n {
		return 0, 0, fmt.Errorf("split %d: index range [%d, %d) outside [0, %d)", s.ID, s.Start, s.End, n)
	}
	return start, end, nil
}

// OpenRange opens an iterator over the values of one split.
func OpenRange(ctx context.Context, o RangeOptions, s Split) (Iterator, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("range source: %w", err)
	}
	start, end, err := checkIndexSplit(s, o.count())
	if err != nil {
		return nil, fmt.Errorf("range source: %w", err)
	}
	o = o.WithDefaults()
	return &rangeIter{o: o, i: start, end: end}, nil
}

type rangeIter struct {
	o      RangeOptions
	i, end int64
}

func (it *rangeIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.i >= it.end {
		return tensor.Element{}, io.EOF
	}
	v := it.o.Start + it.i*it.o.Step
	it.i++
	return tensor.Element{Tensors: []tensor.Tensor{tensor.ScalarInt64("value", v)}}, nil
}

func (it *rangeIter) Close() error { return nil }
