package order

import (
	"errors"
	"fmt"
	"sort"
)

// Index addresses the elements of a dataset: element ids are the flat
// numbering of every split's elements in split order (split 0's first,
// then split 1's…), so a dataset of n elements has ids [0, n). The
// per-split counts come from the dataset's element index, built once when
// the dataset is registered (a Parquet row group's row count from its
// footer; line, JSON-lines, TFRecord and WebDataset files by one scan
// recording each element's byte offset). Locate is O(log splits).
type Index struct {
	// starts[s] is split s's first id; starts[len] is n.
	starts []uint64
}

// MaxSplits bounds how many splits an Index holds (the cluster's own
// bound on a dataset's split list is lower).
const MaxSplits = 1 << 24

// ErrIndex: counts that make no index.
var ErrIndex = errors.New("order: bad element index")

// NewIndex builds the index of splits with the given element counts.
// Empty splits are allowed (they own no ids); the total must be at least
// one element and at most MaxPermSize.
func NewIndex(counts []uint64) (Index, error) {
	if len(counts) == 0 || len(counts) > MaxSplits {
		return Index{}, fmt.Errorf("%w: %d splits (want 1 to %d)", ErrIndex, len(counts), MaxSplits)
	}
	starts := make([]uint64, len(counts)+1)
	var n uint64
	for i, c := range counts {
		if c > MaxPermSize-n {
			return Index{}, fmt.Errorf("%w: more than 2^62 elements by split %d", ErrIndex, i)
		}
		starts[i] = n
		n += c
	}
	if n == 0 {
		return Index{}, fmt.Errorf("%w: no elements", ErrIndex)
	}
	starts[len(counts)] = n
	return Index{starts: starts}, nil
}

// Len is the number of elements.
func (x Index) Len() uint64 {
	if len(x.starts) == 0 {
		return 0
	}
	return x.starts[len(x.starts)-1]
}

// Splits is the number of splits.
func (x Index) Splits() int { return max(len(x.starts)-1, 0) }

// Locate returns the split of element id and the element's index in it.
func (x Index) Locate(id uint64) (split int, elem uint64, err error) {
	if id >= x.Len() {
		return 0, 0, fmt.Errorf("%w: element %d of %d", ErrIndex, id, x.Len())
	}
	// The last split whose start is <= id (empty splits share a start
	// with the next one, so take the last).
	s := sort.Search(len(x.starts)-1, func(i int) bool { return x.starts[i+1] > id })
	return s, id - x.starts[s], nil
}

// ID is the inverse of Locate.
func (x Index) ID(split int, elem uint64) (uint64, error) {
	if split < 0 || split >= x.Splits() || elem >= x.starts[split+1]-x.starts[split] {
		return 0, fmt.Errorf("%w: split %d element %d", ErrIndex, split, elem)
	}
	return x.starts[split] + elem, nil
}
