package batch

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/feedmesh/feedmesh/ranges"
)

// ProvRange is a run of source elements in a batch: indices [Lo, Hi) of
// split Split read for job epoch Epoch.
type ProvRange struct{ Epoch, Split, Lo, Hi int64 }

// A []ProvRange is viewed as its flat wire form, []int64 four to a range,
// without copying (provView, flatProv); that needs the four fields back to
// back with no padding.
var (
	_ = [1]int{}[unsafe.Sizeof(ProvRange{})-32]
	_ = [1]int{}[unsafe.Offsetof(ProvRange{}.Split)-8]
	_ = [1]int{}[unsafe.Offsetof(ProvRange{}.Lo)-16]
	_ = [1]int{}[unsafe.Offsetof(ProvRange{}.Hi)-24]
)

// AppendProvSpan appends the run [lo, hi) of split split, epoch epoch, to
// dst and returns the result, merging it into dst's last range when that is
// of the same epoch and split and ends at or after lo (nothing is appended
// when hi <= lo). Runs must be appended in Header.Prov's order: by epoch,
// then split, then lo; a worker that collects a batch's elements out of
// order keeps a ranges.Set per (epoch, split) and appends those in order
// with AppendProv. Encode checks the result.
func AppendProvSpan(dst []ProvRange, epoch, split, lo, hi int64) []ProvRange {
	if hi <= lo {
		return dst
	}
	if n := len(dst); n > 0 {
		if last := &dst[n-1]; last.Epoch == epoch && last.Split == split && last.Hi >= lo && last.Lo <= lo {
			last.Hi = max(last.Hi, hi)
			return dst
		}
	}
	return append(dst, ProvRange{Epoch: epoch, Split: split, Lo: lo, Hi: hi})
}

// AppendProv appends the element indices idx (a valid ranges.Set) of
// split split, epoch epoch, to dst as one range per interval, merging the
// first into dst's last range where they touch (see AppendProvSpan for the
// order).
func AppendProv(dst []ProvRange, epoch, split int64, idx ranges.Set) []ProvRange {
	for i := 0; i+1 < len(idx); i += 2 {
		dst = AppendProvSpan(dst, epoch, split, idx[i], idx[i+1])
	}
	return dst
}

// Elements returns the number of source elements h.Prov names (0 when the
// worker does not track provenance), or math.MaxInt64 if that many or more.
func (h Header) Elements() int64 {
	var n int64
	for _, r := range h.Prov {
		d := r.Hi - r.Lo
		if d <= 0 {
			continue // not a valid Prov; counts nothing
		}
		if n > math.MaxInt64-d {
			return math.MaxInt64
		}
		n += d
	}
	return n
}

// checkProv checks the invariants of Header.Prov (see there).
func checkProv(p []ProvRange) error {
	for i, r := range p {
		bad := func(what string, args ...any) error {
			return fmt.Errorf("provenance range %d (epoch %d, split %d, [%d, %d)): %s", i, r.Epoch, r.Split, r.Lo, r.Hi, fmt.Sprintf(what, args...))
		}
		switch {
		case r.Epoch < 0:
			return bad("negative epoch")
		case r.Split < 0:
			return bad("negative split")
		case r.Lo < 0:
			return bad("negative start")
		case r.Lo >= r.Hi:
			return bad("empty or reversed")
		}
		if i == 0 {
			continue
		}
		q := p[i-1]
		switch {
		case r.Epoch < q.Epoch || r.Epoch == q.Epoch && r.Split < q.Split:
			return bad("out of order after epoch %d, split %d (want sorted by epoch, split, start)", q.Epoch, q.Split)
		case r.Epoch != q.Epoch || r.Split != q.Split:
		case r.Lo < q.Lo:
			return bad("out of order after [%d, %d) of the same split (want sorted by start)", q.Lo, q.Hi)
		case r.Lo <= q.Hi:
			return bad("overlaps or touches [%d, %d) of the same split (want disjoint, merged runs)", q.Lo, q.Hi)
		}
	}
	return nil
}

// checkWireProv checks a decoded header's flat provenance against the limit
// and Header.Prov's invariants.
func checkWireProv(flat []int64, lim Limits) error {
	if len(flat)%4 != 0 {
		return malformed("provenance of %d integers, not 4 (epoch, split, lo, hi) a range", len(flat))
	}
	if n := len(flat) / 4; n > lim.MaxProvRanges {
		return malformed("%d provenance ranges, limit %d", n, lim.MaxProvRanges)
	}
	if err := checkProv(provView(flat)); err != nil {
		return malformed("%v", err)
	}
	return nil
}

// provView returns the ranges of a flat provenance, four integers a range
// (a trailing partial range is dropped; planTail rejects one), sharing its
// memory; nil for none.
func provView(flat []int64) []ProvRange {
	n := len(flat) / 4
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*ProvRange)(unsafe.Pointer(unsafe.SliceData(flat))), n)
}

// flatProv returns p's wire form, sharing its memory; nil for none.
func flatProv(p []ProvRange) []int64 {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(p))), 4*len(p))
}
