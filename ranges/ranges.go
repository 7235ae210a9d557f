package ranges

import (
	"fmt"
	"slices"
	"sort"
)

// Set is a set of non-negative int64s (element indices within a split)
// kept as sorted, disjoint, non-adjacent half-open intervals, flattened:
// [lo0, hi0, lo1, hi1, …] with lo0 < hi0 < lo1 < hi1 … So a split read
// completely is two numbers however many elements it has, and a shuffled
// delivery fragments it only while it is in progress.
//
// The zero value is the empty set. Set encodes in CBOR as an array of
// integers; a decoded Set is input from disk or the network and must
// pass Validate before use. Methods that change the set take a pointer.
type Set []int64

// Of returns the set of the given indices (any order, duplicates
// allowed).
func Of(idx ...int64) Set {
	s := slices.Clone(idx)
	slices.Sort(s)
	var r Set
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j] <= s[j-1]+1 {
			j++
		}
		r = append(r, s[i], s[j-1]+1)
		i = j
	}
	return r
}

// Span returns the set [lo, hi) (empty when hi <= lo).
func Span(lo, hi int64) Set {
	if hi <= lo {
		return nil
	}
	return Set{lo, hi}
}

// Validate checks the invariants: even length, lo < hi within each
// interval, intervals sorted, disjoint and not adjacent, no negative value.
func (r Set) Validate() error {
	if len(r)%2 != 0 {
		return fmt.Errorf("ranges: odd length %d", len(r))
	}
	for i := 0; i < len(r); i += 2 {
		lo, hi := r[i], r[i+1]
		switch {
		case lo < 0:
			return fmt.Errorf("ranges: negative start %d", lo)
		case lo >= hi:
			return fmt.Errorf("ranges: empty or reversed interval [%d, %d)", lo, hi)
		case i > 0 && lo <= r[i-1]:
			return fmt.Errorf("ranges: interval [%d, %d) overlaps or touches the one before, ending at %d", lo, hi, r[i-1])
		}
	}
	return nil
}

// Len is the number of indices in the set.
func (r Set) Len() int64 {
	var n int64
	for i := 0; i+1 < len(r); i += 2 {
		n += r[i+1] - r[i]
	}
	return n
}

// Covers reports whether r holds every index of want, without allocating
// (the state machine checks it for every split a produce or receipts
// command names, on every voter).
func (r Set) Covers(want Set) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if !r.ContainsSpan(want[i], want[i+1]) {
			return false
		}
	}
	return true
}

// Intervals is the number of intervals (the set's size in memory is twice
// that in int64s).
func (r Set) Intervals() int { return len(r) / 2 }

// Empty reports whether the set has no index.
func (r Set) Empty() bool { return len(r) == 0 }

// Contains reports whether i is in the set.
func (r Set) Contains(i int64) bool {
	// The first interval whose end is > i.
	k := sort.Search(len(r)/2, func(k int) bool { return r[2*k+1] > i })
	return k < len(r)/2 && r[2*k] <= i
}

// ContainsSpan reports whether every index of [lo, hi) is in the set (true
// for an empty span).
func (r Set) ContainsSpan(lo, hi int64) bool {
	if hi <= lo {
		return true
	}
	k := sort.Search(len(r)/2, func(k int) bool { return r[2*k+1] > lo })
	return k < len(r)/2 && r[2*k] <= lo && r[2*k+1] >= hi
}

// CountIn is how many indices of [lo, hi) are in the set, without
// allocating (Intersect(Span(lo, hi)).Len()).
func (r Set) CountIn(lo, hi int64) int64 {
	if hi <= lo {
		return 0
	}
	var n int64
	k := sort.Search(len(r)/2, func(k int) bool { return r[2*k+1] > lo })
	for ; k < len(r)/2 && r[2*k] < hi; k++ {
		n += min(hi, r[2*k+1]) - max(lo, r[2*k])
	}
	return n
}

// Add adds index i.
func (r *Set) Add(i int64) { r.AddSpan(i, i+1) }

// AddSpan adds [lo, hi) (nothing when hi <= lo).
func (r *Set) AddSpan(lo, hi int64) {
	if hi <= lo {
		return
	}
	s := *r
	n := len(s) / 2
	// Fast path: appending at the end (in-order delivery).
	if n == 0 || lo > s[len(s)-1] {
		*r = append(s, lo, hi)
		return
	}
	if lo == s[len(s)-1] {
		s[len(s)-1] = max(s[len(s)-1], hi)
		return
	}
	// a: first interval that ends at or after lo (touching merges);
	// b: first interval that starts after hi.
	a := sort.Search(n, func(k int) bool { return s[2*k+1] >= lo })
	b := sort.Search(n, func(k int) bool { return s[2*k] > hi })
	if a == b { // between intervals a-1 and a, touching neither
		*r = slices.Insert(s, 2*a, lo, hi)
		return
	}
	nlo, nhi := min(lo, s[2*a]), max(hi, s[2*b-1])
	s[2*a], s[2*a+1] = nlo, nhi
	*r = slices.Delete(s, 2*a+2, 2*b)
}

// AddAll adds every index of o.
func (r *Set) AddAll(o Set) {
	for i := 0; i+1 < len(o); i += 2 {
		r.AddSpan(o[i], o[i+1])
	}
}

// Intersect returns the indices in both sets.
func (r Set) Intersect(o Set) Set {
	var out Set
	i, j := 0, 0
	for i+1 < len(r) && j+1 < len(o) {
		lo, hi := max(r[i], o[j]), min(r[i+1], o[j+1])
		if lo < hi {
			out = append(out, lo, hi)
		}
		if r[i+1] < o[j+1] {
			i += 2
		} else {
			j += 2
		}
	}
	return out
}

// Minus returns the indices of r that are not in o.
func (r Set) Minus(o Set) Set {
	var out Set
	j := 0
	for i := 0; i+1 < len(r); i += 2 {
		lo, hi := r[i], r[i+1]
		for j+1 < len(o) && o[j+1] <= lo {
			j += 2
		}
		for k := j; k+1 < len(o) && o[k] < hi; k += 2 {
			if o[k] > lo {
				out = append(out, lo, o[k])
			}
			lo = max(lo, o[k+1])
		}
		if lo < hi {
			out = append(out, lo, hi)
		}
	}
	return out
}

// Clone returns a copy that shares nothing with r.
func (r Set) Clone() Set { return slices.Clone(r) }

// Each calls f for every index in ascending order until f returns false.
func (r Set) Each(f func(int64) bool) {
	for i := 0; i+1 < len(r); i += 2 {
		for x := r[i]; x < r[i+1]; x++ {
			if !f(x) {
				return
			}
		}
	}
}

// String formats the set as "[0,10) [12,13)".
func (r Set) String() string {
	if len(r) == 0 {
		return "{}"
	}
	b := make([]byte, 0, 8*len(r))
	for i := 0; i+1 < len(r); i += 2 {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "[%d,%d)", r[i], r[i+1])
	}
	return string(b)
}
