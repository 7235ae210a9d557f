package client

import (
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// The tracker: what Next returned is the part; a heartbeat that finds the
// consumer alone and epochs settled turns those epochs into "done, except
// what is still buffered"; a part that outgrows a checkpoint is dropped
// (bounded memory) and Checkpoint says why.
func TestTracker(t *testing.T) {
	tr := newTracker(nil)
	prov := func(e, s, lo, hi int64) []batch.ProvRange {
		return []batch.ProvRange{{Epoch: e, Split: s, Lo: lo, Hi: hi}}
	}
	tr.received(prov(0, 1, 0, 10))
	tr.received(prov(0, 2, 0, 10))
	tr.received(prov(1, 0, 0, 5))
	tr.returned(prov(0, 1, 0, 10))
	tr.returned(prov(1, 0, 0, 5))
	p, n, _, err := tr.snapshot()
	if err != nil || n != 2 || p.DoneBefore != 0 || !p.Returned[0][1].ContainsSpan(0, 10) || !p.Returned[1][0].ContainsSpan(0, 5) || p.Returned[0][2] != nil {
		t.Fatalf("part %+v, %d batches, %v", p, n, err)
	}
	info := api.JobInfo{Consumers: []string{"me"}, Exact: &api.ExactInfo{SettledBefore: 1}}
	tr.beat(api.JobInfo{Consumers: []string{"me", "other"}, Exact: info.Exact}, "me")
	if p, _, _, _ := tr.snapshot(); p.DoneBefore != 0 {
		t.Fatalf("compacted with two consumers: %+v", p)
	}
	tr.beat(info, "me")
	p, _, _, _ = tr.snapshot()
	if p.DoneBefore != 1 || !p.Missing[0][2].ContainsSpan(0, 10) || p.Missing[0][1] != nil || p.Returned[0] != nil || p.Returned[1] == nil {
		t.Fatalf("after a sole consumer's heartbeat: %+v", p)
	}
	tr.returned(prov(0, 2, 0, 4))
	if p, _, _, _ = tr.snapshot(); !slices.Equal(p.Missing[0][2], ranges.Set{4, 10}) {
		t.Fatalf("missing after a return: %+v", p.Missing)
	}

	big := newTracker(nil)
	for i := range int64(maxCheckpointIntervals + 1) {
		big.returned(prov(0, i%1000, 2*(i/1000), 2*(i/1000)+1)) // never adjacent: one interval each
	}
	if _, _, _, err := big.snapshot(); err == nil || !strings.Contains(err.Error(), "outgrew a checkpoint") {
		t.Fatalf("overflow: %v", err)
	}
	if !big.overflow || big.part.Returned != nil {
		t.Fatal("an overflowed tracker keeps its part")
	}
}

// withoutSpan trims in place when the span starts the set, and otherwise
// agrees with Minus.
func TestWithoutSpan(t *testing.T) {
	for _, c := range []struct {
		u      ranges.Set
		lo, hi int64
		want   ranges.Set
	}{
		{ranges.Set{0, 10}, 0, 10, nil},
		{ranges.Set{0, 10}, 0, 4, ranges.Set{4, 10}},
		{ranges.Set{0, 10, 20, 30}, 0, 10, ranges.Set{20, 30}},
		{ranges.Set{0, 10, 20, 30}, 20, 30, ranges.Set{0, 10}},
		{ranges.Set{0, 10}, 3, 5, ranges.Set{0, 3, 5, 10}},
		{ranges.Set{0, 10}, 5, 15, ranges.Set{0, 5}},
		{nil, 0, 5, nil},
	} {
		want := c.u.Minus(ranges.Set{c.lo, c.hi})
		got := withoutSpan(slices.Clone(c.u), c.lo, c.hi)
		if !slices.Equal(got, c.want) || !slices.Equal(got, want) {
			t.Errorf("withoutSpan(%v, %d, %d) = %v, want %v (Minus: %v)", c.u, c.lo, c.hi, got, c.want, want)
		}
	}
}
