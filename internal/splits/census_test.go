package splits

import (
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/fxamacker/cbor/v2"
)

// TestCensusTable walks an at-most-once job with a count (census.go)
// through a worker's death: its produced split settles as lost once the
// consumers have fenced it, its leased one is run as a census by a live
// worker (not a local one), and the count is what the receipts do not
// cover.
func TestCensusTable(t *testing.T) {
	d := NewDynamicCounted(3, 1)
	if !d.Counted() || !d.Tracked() || d.ExactlyOnce() {
		t.Fatalf("counted %v tracked %v exactly-once %v", d.Counted(), d.Tracked(), d.ExactlyOnce())
	}
	if l := d.Lease("w1", 1, 2); len(l.Splits) != 2 || l.Census {
		t.Fatalf("lease: %+v", l)
	}
	// w1 emits split 0 (10 elements) and part of split 1, then dies; c1
	// received 4 elements of split 0 and 3 of split 1, c2 one more of 0.
	if err := d.Produce("w1", 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Span(0, 10)}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		c    string
		s    int64
		span ranges.Set
	}{{"c1", 0, ranges.Span(0, 4)}, {"c1", 1, ranges.Span(0, 3)}, {"c2", 0, ranges.Span(4, 5)}} {
		if err := d.Receive(r.c, 0, r.s, r.span); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.ExpireWorker("w1", []string{"c1", "c2"}); n != 2 {
		t.Fatalf("orphaned %d, want 2", n)
	}
	mustValid(t, d)
	// Before the fences nothing is counted or leased for a census, and
	// receipts still come in (c2 had 2 more of split 0 on their way).
	if err := d.Receive("c2", 0, 0, ranges.Span(5, 7)); err != nil {
		t.Fatal(err)
	}
	d.Fence("c1", "w1")
	if l := d.Lease("w2", 1, 5); len(l.Splits) != 1 || l.Splits[0] != 2 || l.Census {
		t.Fatalf("lease before the last fence: %+v", l)
	}
	if got := d.Progress().Exact.Lost; got != 0 {
		t.Fatalf("lost %d before the fences", got)
	}
	d.Fence("c2", "w1")
	mustValid(t, d)
	// Split 0 settled: 10 emitted, 7 received.
	if p := d.Progress(); p.Exact.Lost != 3 || p.Total.Lost != 1 || p.Exact.Orphaned != 1 {
		t.Fatalf("after the fences: %+v %+v", p, p.Exact)
	}
	// A client's local worker is not given the census; a node is.
	if l := d.Lease(jobspec.LocalWorkerName("c1"), 1, 5); len(l.Splits) != 0 {
		t.Fatalf("a local worker got %+v", l)
	}
	if !d.CensusWaiting() {
		t.Fatal("no census waiting")
	}
	l := d.Lease("w2", 2, 5)
	if !l.Census || len(l.Splits) != 1 || l.Splits[0] != 1 || l.Exclude[0].String() != "[0,3)" {
		t.Fatalf("census lease: %+v", l)
	}
	if d.CensusWaiting() {
		t.Fatal("a census waiting after it was leased")
	}
	// The census emits what is left of split 1 (elements 3..7), counted
	// lost; split 2 is produced and received as any.
	if err := d.Produce("w2", 0, []ranges.SplitEmitted{{Split: 1, Emitted: ranges.Span(3, 8)}, {Split: 2, Emitted: ranges.Span(0, 6)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Receive("c1", 0, 2, ranges.Span(0, 6)); err != nil {
		t.Fatal(err)
	}
	if !d.Complete() {
		t.Fatalf("not complete: %+v %+v", d.Progress(), d.Progress().Exact)
	}
	p := d.Progress()
	if p.Exact.Lost != 3+5 || p.Exact.Censused != 1 || p.Exact.Requeued != 0 || p.Total.Lost != 2 || p.Total.Finished != 1 || !p.Exact.AtMostOnce {
		t.Fatalf("complete: %+v %+v", p, p.Exact)
	}
	mustValid(t, d)
}

// TestCensusLocalWorkerThatRunsOne: a client's local worker that says it
// runs a census (LeaseAs's runsCensus) is leased one like a node, with the
// delivered elements excluded, and what it emits is counted lost; one that
// does not say so is leased none.
func TestCensusLocalWorkerThatRunsOne(t *testing.T) {
	d := NewDynamicCounted(2, 1)
	local := jobspec.LocalWorkerName("c1")
	if l := d.Lease("w1", 1, 1); len(l.Splits) != 1 || l.Splits[0] != 0 {
		t.Fatalf("lease: %+v", l)
	}
	if err := d.Receive("c1", 0, 0, ranges.Span(0, 4)); err != nil {
		t.Fatal(err)
	}
	if n := d.ExpireWorker("w1", []string{"c1"}); n != 1 {
		t.Fatalf("orphaned %d, want 1", n)
	}
	d.Fence("c1", "w1")
	if l := d.LeaseAs(local, 1, 5, nil, false); l.Census || slices.Contains(l.Splits, 0) {
		t.Fatalf("a local worker that runs no census got %+v", l)
	}
	l := d.LeaseAs(local, 2, 5, nil, true)
	if !l.Census || len(l.Splits) != 1 || l.Splits[0] != 0 || l.Exclude[0].String() != "[0,4)" {
		t.Fatalf("census lease of a local worker that runs one: %+v", l)
	}
	mustValid(t, d)
	if err := d.Produce(local, 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Span(4, 10)}}); err != nil {
		t.Fatal(err)
	}
	if p := d.Progress(); p.Exact.Lost != 6 || p.Exact.Censused != 1 {
		t.Fatalf("after the census: %+v %+v", p, p.Exact)
	}
	mustValid(t, d)
}

// TestCensusWorkerDiesOrHandsBack: a census whose worker dies, or that a
// draining worker hands back, is run by the next worker, and counted once.
func TestCensusWorkerDiesOrHandsBack(t *testing.T) {
	d := NewDynamicCounted(1, 1)
	d.Lease("w1", 1, 1)
	d.ExpireWorker("w1", nil) // no consumer attached: nothing to fence
	l := d.Lease("w2", 1, 1)
	if !l.Census || len(l.Splits) != 1 {
		t.Fatalf("census lease: %+v", l)
	}
	d.ExpireWorker("w2", []string{"c1"})
	d.Fence("c1", "w2")
	mustValid(t, d)
	if l := d.Lease("w3", 1, 1); !l.Census || len(l.Splits) != 1 {
		t.Fatalf("census lease after its worker died: %+v", l)
	}
	if err := d.HandBack("w3", 0, []int64{0}); err != nil {
		t.Fatal(err)
	}
	mustValid(t, d)
	if d.Total.HandedBack != 0 || len(d.HandedBack) != 0 {
		t.Fatalf("a census handed back went to the handed-back splits: %+v", d.HandedBack)
	}
	if l := d.Lease("w4", 1, 1); !l.Census || len(l.Splits) != 1 {
		t.Fatalf("census lease after a hand-back: %+v", l)
	}
	// A late report from w2, whose census was taken from it, is refused.
	if err := d.Produce("w2", 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Span(0, 4)}}); err == nil {
		t.Fatal("a dead census worker's report accepted")
	}
	if err := d.Produce("w4", 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Span(0, 4)}}); err != nil {
		t.Fatal(err)
	}
	if p := d.Progress(); !p.Complete || p.Exact.Lost != 4 || p.Exact.Censused != 3 || p.Total.Lost != 1 {
		t.Fatalf("complete: %+v %+v", p, p.Exact)
	}
}

// TestCensusValidate: a decoded state with census bookkeeping that breaks
// an invariant is refused; a counted state survives CBOR and Clone.
func TestCensusValidate(t *testing.T) {
	d := NewDynamicCounted(3, 1)
	d.Lease("w1", 1, 2)
	d.Produce("w1", 0, []ranges.SplitEmitted{{Split: 0, Emitted: ranges.Span(0, 3)}})
	d.ExpireWorker("w1", []string{"c1"})
	mustValid(t, d)
	b, err := cbor.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back DynamicState
	if err := cbor.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	mustValid(t, &back)
	if !back.Counted() || len(back.Exact.Forfeit) != 1 {
		t.Fatalf("decoded: %+v", back.Exact)
	}
	for name, break_ := range map[string]func(d *DynamicState){
		"census maps without a census": func(d *DynamicState) { d.Exact.Census = false },
		"forfeit not orphaned": func(d *DynamicState) {
			d.Exact.forfeit(0, 2, ranges.Span(0, 1))
		},
		"census not leased": func(d *DynamicState) {
			d.Exact.Censusing = map[int64]map[int64]bool{0: {0: true}}
		},
		"negative loss": func(d *DynamicState) { d.Exact.Counts.Lost = -1 },
	} {
		c := d.Clone()
		break_(c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
