package bucketing

import (
	"fmt"
	"sort"
)

// Index returns the bucket a sequence of the given length falls in. Bucket i
// holds lengths in (boundaries[i-1], boundaries[i]]; bucket 0 holds every
// length <= boundaries[0] and bucket len(boundaries) every length above the
// last boundary. boundaries must be strictly increasing (see Validate).
func Index(length int64, boundaries []int64) int {
	return sort.Search(len(boundaries), func(i int) bool { return length <= boundaries[i] })
}

// Validate checks a bucketing configuration: boundaries strictly increasing
// and positive, and one batch size per bucket (len(boundaries)+1), each > 0.
// Messages name the field as written in specs.
func Validate(boundaries, batchSizes []int64) error {
	if len(boundaries) == 0 {
		return fmt.Errorf("boundaries: must not be empty")
	}
	for i, b := range boundaries {
		if b <= 0 {
			return fmt.Errorf("boundaries[%d]: must be > 0, got %d", i, b)
		}
		if i > 0 && b <= boundaries[i-1] {
			return fmt.Errorf("boundaries[%d]: must be greater than boundaries[%d] (%d), got %d", i, i-1, boundaries[i-1], b)
		}
	}
	if len(batchSizes) != len(boundaries)+1 {
		return fmt.Errorf("batch_sizes: want %d entries (one per bucket: len(boundaries)+1), got %d", len(boundaries)+1, len(batchSizes))
	}
	for i, s := range batchSizes {
		if s <= 0 {
			return fmt.Errorf("batch_sizes[%d]: must be > 0, got %d", i, s)
		}
	}
	return nil
}

// Batch is a full or partial batch of one bucket.
type Batch[T any] struct {
	// Bucket is the bucket index (see Index).
	Bucket int
	// Items are the batch's items in arrival order.
	Items []T
}

// Bucketer accumulates items into per-bucket batches. It holds at most
// sum(batchSizes) - len(batchSizes) items between calls, so its memory is
// bounded by the configuration. The zero value is not usable; call New.
type Bucketer[T any] struct {
	boundaries []int64
	sizes      []int64
	pending    [][]T
}

// New returns a Bucketer for a configuration that passed Validate.
func New[T any](boundaries, batchSizes []int64) (*Bucketer[T], error) {
	if err := Validate(boundaries, batchSizes); err != nil {
		return nil, err
	}
	return &Bucketer[T]{
		boundaries: append([]int64(nil), boundaries...),
		sizes:      append([]int64(nil), batchSizes...),
		pending:    make([][]T, len(batchSizes)),
	}, nil
}

// Add puts an item of the given length in its bucket. When that fills the
// bucket's batch, the batch is returned with ok true and the bucket starts
// empty again.
func (b *Bucketer[T]) Add(length int64, item T) (batch Batch[T], ok bool) {
	i := Index(length, b.boundaries)
	if b.pending[i] == nil {
		b.pending[i] = make([]T, 0, min(b.sizes[i], 1024)) // grows if needed
	}
	b.pending[i] = append(b.pending[i], item)
	if int64(len(b.pending[i])) < b.sizes[i] {
		return Batch[T]{}, false
	}
	out := Batch[T]{Bucket: i, Items: b.pending[i]}
	b.pending[i] = nil
	return out, true
}

// Pending is the number of items held in partial batches.
func (b *Bucketer[T]) Pending() int {
	n := 0
	for _, p := range b.pending {
		n += len(p)
	}
	return n
}

// Flush returns the partial batches, in bucket order, and empties the
// Bucketer. It is what happens at the end of the input (unless the caller
// drops remainders).
func (b *Bucketer[T]) Flush() []Batch[T] {
	var out []Batch[T]
	for i, p := range b.pending {
		if len(p) > 0 {
			out = append(out, Batch[T]{Bucket: i, Items: p})
		}
		b.pending[i] = nil
	}
	return out
}
