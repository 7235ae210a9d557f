package bucketing

import (
	"errors"
	"fmt"
	"slices"
)

// ErrGrouperFull is returned by Grouper.Add when holding one more batch
// would exceed the Grouper's maxPending: too many buckets have partial
// windows. The caller should stop reading input (or raise the bound).
var ErrGrouperFull = errors.New("grouper holds its maximum of pending batches")

// Window is one round's worth of batches of a coordinated job: m consecutive
// batches of the same bucket; consumer i gets Batches[i].
type Window[T any] struct {
	// Bucket is the bucket every batch of the window comes from.
	Bucket int
	// Batches holds exactly m batches, in arrival order, padded ones last.
	Batches []T
	// Padded is how many trailing batches were made by Flush's filler at
	// the end of the data (0 for a window filled by Add). Stats report it.
	Padded int
}

// Grouper collects batches per bucket and emits a window whenever a bucket
// has m of them. At the end of the data Flush returns the partial windows,
// padded or dropped as the job's option says. It is pure and not safe for
// concurrent use. The zero value is not usable; call NewGrouper.
type Grouper[T any] struct {
	m          int
	maxPending int
	pending    map[int][]T // never holds an empty slice
	n          int         // batches held across all buckets
	dropped    int64
}

// NewGrouper returns a Grouper for windows of m batches (m = the number of
// consumers) holding at most maxPending batches across all buckets between
// calls. maxPending must be at least m-1, or no bucket could ever fill a
// window; (m-1) × number of buckets never blocks.
func NewGrouper[T any](m int, maxPending int) (*Grouper[T], error) {
	if m < 1 {
		return nil, fmt.Errorf("new grouper: m (consumers per round): must be >= 1, got %d", m)
	}
	if maxPending < m-1 {
		return nil, fmt.Errorf("new grouper: maxPending: must be >= m-1 (%d) so a bucket can fill a window, got %d", m-1, maxPending)
	}
	return &Grouper[T]{m: m, maxPending: maxPending, pending: make(map[int][]T)}, nil
}

// Add puts batch b of the given bucket in its bucket's partial window. When
// that completes the window it is returned with ok true (and no longer held).
// Adding to a bucket that would not complete a window errors, wrapping
// ErrGrouperFull, if maxPending batches are already held; b is then not
// taken.
func (g *Grouper[T]) Add(bucket int, b T) (w Window[T], ok bool, err error) {
	if bucket < 0 {
		return Window[T]{}, false, fmt.Errorf("group batch: bucket %d: must be >= 0", bucket)
	}
	p := g.pending[bucket]
	if len(p)+1 == g.m {
		delete(g.pending, bucket)
		g.n -= len(p)
		return Window[T]{Bucket: bucket, Batches: append(p, b)}, true, nil
	}
	if g.n >= g.maxPending {
		return Window[T]{}, false, fmt.Errorf("group batch of bucket %d: %w (%d)", bucket, ErrGrouperFull, g.maxPending)
	}
	if p == nil {
		p = make([]T, 0, g.m)
	}
	g.pending[bucket] = append(p, b)
	g.n++
	return Window[T]{}, false, nil
}

// Pending is the number of batches held in partial windows.
func (g *Grouper[T]) Pending() int { return g.n }

// Dropped is the number of batches Flush has dropped so far.
func (g *Grouper[T]) Dropped() int64 { return g.dropped }

// Flush ends the data: it returns the partial windows in bucket order and
// empties the Grouper. With drop, the partial windows are discarded (counted
// in Dropped) and Flush returns nil; otherwise each is padded out to m
// batches with pad(bucket) (the zero T if pad is nil), so every consumer
// still gets a batch in the final rounds, maybe an empty one. Both ways every
// consumer ends at the same round.
func (g *Grouper[T]) Flush(pad func(bucket int) T, drop bool) []Window[T] {
	buckets := make([]int, 0, len(g.pending))
	for k := range g.pending {
		buckets = append(buckets, k)
	}
	slices.Sort(buckets)
	var out []Window[T]
	for _, k := range buckets {
		p := g.pending[k]
		if drop {
			g.dropped += int64(len(p))
			continue
		}
		w := Window[T]{Bucket: k, Batches: p, Padded: g.m - len(p)}
		for len(w.Batches) < g.m {
			var filler T
			if pad != nil {
				filler = pad(k)
			}
			w.Batches = append(w.Batches, filler)
		}
		out = append(out, w)
	}
	clear(g.pending)
	g.n = 0
	return out
}
