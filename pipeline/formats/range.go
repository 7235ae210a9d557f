package formats

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
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
	if n <= 0 {
		return nil, nil
	}
	if size <= 0 || size > n {
		size = n
	}
	if k := (n + size - 1) / size; k > MaxIndexSplits {
		return nil, fmt.Errorf("%d elements in splits of %d make %d splits, over the limit of %d: raise split_size", n, size, k, MaxIndexSplits)
	}
	out := make([]Split, 0, (n+size-1)/size)
	for start := int64(0); start < n; start += size {
		out = append(out, Split{ID: int64(len(out)), Start: start, End: min(start+size, n)})
	}
	return out, nil
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
