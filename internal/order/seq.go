package order

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Range is the half-open interval [Lo, Hi) of positions.
type Range struct{ Lo, Hi uint64 }

// Gaps are positions left out of a sequence: skipped ranges and positions
// already delivered. They are kept as sorted, disjoint, non-adjacent
// ranges with their cumulative lengths, so selecting the r-th kept
// position is O(log ranges).
type Gaps struct {
	r   []Range
	cum []uint64 // cum[i]: total length of r[:i]
}

// ErrRanges: ranges that are not sorted, disjoint and non-empty.
var ErrRanges = errors.New("order: bad ranges")

// NewGaps returns the union of rs (any order, overlaps allowed, empty
// ranges ignored).
func NewGaps(rs ...Range) Gaps {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b Range) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	var out []Range
	for _, x := range s {
		if x.Hi <= x.Lo {
			continue
		}
		if n := len(out); n > 0 && x.Lo <= out[n-1].Hi {
			out[n-1].Hi = max(out[n-1].Hi, x.Hi)
			continue
		}
		out = append(out, x)
	}
	return gapsOf(out)
}

func gapsOf(r []Range) Gaps {
	cum := make([]uint64, len(r)+1)
	for i, x := range r {
		cum[i+1] = cum[i] + (x.Hi - x.Lo)
	}
	return Gaps{r: r, cum: cum}
}

// Ranges returns the gaps' ranges (a copy).
func (g Gaps) Ranges() []Range { return slices.Clone(g.r) }

// Contains reports whether p is in a gap.
func (g Gaps) Contains(p uint64) bool {
	i := sort.Search(len(g.r), func(i int) bool { return g.r[i].Hi > p })
	return i < len(g.r) && g.r[i].Lo <= p
}

// before is how many gap positions are < p.
func (g Gaps) before(p uint64) uint64 {
	i := sort.Search(len(g.r), func(i int) bool { return g.r[i].Hi > p })
	n := g.cumAt(i)
	if i < len(g.r) && g.r[i].Lo < p {
		n += p - g.r[i].Lo
	}
	return n
}

// Rank is how many kept positions are < p.
func (g Gaps) Rank(p uint64) uint64 { return p - g.before(p) }

// Select is the kept position of rank t (the t-th kept position counting
// from 0). The sequence of kept positions is unbounded: the end of an
// epoch is the caller's.
func (g Gaps) Select(t uint64) uint64 {
	// The gap ranges whose start has rank <= t lie before the answer;
	// rank(r[i].Lo) = r[i].Lo - cum[i] is non-decreasing in i.
	i := sort.Search(len(g.r), func(i int) bool { return g.r[i].Lo-g.cum[i] > t })
	return t + g.cumAt(i)
}

// cumAt is the total length of the first i ranges (the zero Gaps has no
// cum).
func (g Gaps) cumAt(i int) uint64 {
	if i >= len(g.cum) {
		return 0
	}
	return g.cum[i]
}

// Cut is the division of a sequence of global positions among N
// consumers: the positions from Start, less the Gaps, in order; the r-th
// of them goes to consumer r mod N as its (r div N)-th. With positions
// counted in global batches, consumer i of N gets global batches i, i+N,
// i+2N… (Mosaic's rule: the global order is fixed; a step of N consumers
// takes N consecutive global batches, one each).
type Cut struct {
	Start uint64
	Gaps  Gaps
	N     uint64
}

// ErrCut: a cut or a consumer outside it.
var ErrCut = errors.New("order: bad cut")

// MaxConsumers bounds N.
const MaxConsumers = 1 << 20

// MaxAheadPositions bounds the positions Merge collects that consumers
// were given beyond the slowest one's.
const MaxAheadPositions = 1 << 16

// Nth is the global position of consumer i's k-th position.
func (c Cut) Nth(i, k uint64) (uint64, error) {
	if c.N == 0 || c.N > MaxConsumers || i >= c.N {
		return 0, fmt.Errorf("%w: consumer %d of %d", ErrCut, i, c.N)
	}
	if k > (MaxPermSize)/c.N {
		return 0, fmt.Errorf("%w: position %d of consumer %d is past 2^62", ErrCut, k, i)
	}
	return c.Gaps.Select(c.Gaps.Rank(c.Start) + k*c.N + i), nil
}

// ConsumerProgress is where one consumer of a cut stands: it has been
// given positions 0..Next-1 of its share (Next is what a checkpoint
// records).
type ConsumerProgress struct {
	Index uint64
	Next  uint64
}

// Merge is the re-cut after a resume: from the progress of every one of
// the old cut's N consumers (each exactly once), the cut of what remains
// among n consumers. The remaining sequence starts at the first position
// no consumer was given; positions after it that some consumer was given
// (a consumer ahead of another: checkpoints taken between two steps)
// become gaps, at most maxAhead ranges of them, or Merge refuses (say
// which consumers lag). Together, the old consumers' positions and the
// new cut's are every kept position exactly once.
func Merge(old Cut, progress []ConsumerProgress, n uint64, maxAhead int) (Cut, error) {
	if old.N == 0 || old.N > MaxConsumers || uint64(len(progress)) != old.N {
		return Cut{}, fmt.Errorf("%w: %d checkpoints of a cut of %d consumers", ErrCut, len(progress), old.N)
	}
	if n == 0 || n > MaxConsumers {
		return Cut{}, fmt.Errorf("%w: resume on %d consumers", ErrCut, n)
	}
	seen := make([]bool, old.N)
	base := old.Gaps.Rank(old.Start)
	// In rank space (ranks of kept positions, from base), consumer i was
	// given base + k·N + i for k < Next.
	var lo uint64 = ^uint64(0)
	for _, p := range progress {
		if p.Index >= old.N || seen[p.Index] {
			return Cut{}, fmt.Errorf("%w: consumer %d twice or outside [0, %d)", ErrCut, p.Index, old.N)
		}
		seen[p.Index] = true
		if p.Next > MaxPermSize/old.N {
			return Cut{}, fmt.Errorf("%w: consumer %d at %d is past 2^62", ErrCut, p.Index, p.Next)
		}
		lo = min(lo, p.Next*old.N+p.Index)
	}
	// Ranks >= lo that were given: consumer i gave ranks lo..(Next_i·N+i)
	// congruent to i. Collect them as rank ranges, then map to positions.
	var ahead []uint64
	for _, p := range progress {
		var k0 uint64
		if lo > p.Index {
			k0 = (lo - p.Index + old.N - 1) / old.N
		}
		if p.Next <= k0 {
			continue
		}
		if uint64(len(ahead))+(p.Next-k0) > MaxAheadPositions {
			return Cut{}, fmt.Errorf("%w: consumer %d is %d positions ahead of the slowest (at most %d): resume from checkpoints of one step", ErrCut, p.Index, p.Next*old.N+p.Index-lo, uint64(MaxAheadPositions))
		}
		for k := k0; k < p.Next; k++ {
			ahead = append(ahead, k*old.N+p.Index)
		}
	}
	slices.Sort(ahead)
	var rs []Range
	for _, r := range ahead {
		pos := old.Gaps.Select(base + r)
		if m := len(rs); m > 0 && rs[m-1].Hi == pos {
			rs[m-1].Hi++
			continue
		}
		rs = append(rs, Range{pos, pos + 1})
	}
	start := old.Gaps.Select(base + lo)
	// Keep the old gaps at or after start (the skips ahead), add the ahead
	// ranges (which may now touch a skip: NewGaps joins them).
	all := rs
	for _, r := range old.Gaps.r {
		if r.Hi > start {
			all = append(all, Range{max(r.Lo, start), r.Hi})
		}
	}
	g := NewGaps(all...)
	aheadRanges := 0
	for _, r := range g.r {
		if !old.Gaps.containsRange(r) {
			aheadRanges++
		}
	}
	if aheadRanges > maxAhead {
		return Cut{}, fmt.Errorf("%w: the consumers' checkpoints leave %d ranges delivered ahead of position %d (at most %d): resume them from checkpoints of one step", ErrCut, aheadRanges, start, maxAhead)
	}
	return Cut{Start: start, Gaps: g, N: n}, nil
}

// containsRange reports whether r lies within one gap.
func (g Gaps) containsRange(r Range) bool {
	i := sort.Search(len(g.r), func(i int) bool { return g.r[i].Hi > r.Lo })
	return i < len(g.r) && g.r[i].Lo <= r.Lo && r.Hi <= g.r[i].Hi
}

// Owner is the inverse of Nth: which consumer gets global position p and
// as its how-manyth; ok is false for a position in a gap or before Start
// (nobody gets it).
func (c Cut) Owner(p uint64) (i, k uint64, ok bool) {
	if c.N == 0 || c.N > MaxConsumers || p < c.Start || c.Gaps.Contains(p) {
		return 0, 0, false
	}
	r := c.Gaps.Rank(p) - c.Gaps.Rank(c.Start)
	return r % c.N, r / c.N, true
}
