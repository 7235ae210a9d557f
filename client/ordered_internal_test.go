package client

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// orderedPlan: 300 elements in blocks of 8, windows of 3 blocks, batches
// of 5: windows of 24 elements (5 batches, the last short) and one of 12
// (3 batches).
var orderedPlan = pipeline.OrderPlan{Elements: 300, Block: 8, Window: 3, Seed: 9, BatchSize: 5}

// sequence is every batch of epochs 0..epochs-1 in order, as items with
// their provenance.
func sequence(t *testing.T, epochs int64) []item {
	var out []item
	for e := range epochs {
		l, err := orderedPlan.Layout(e)
		if err != nil {
			t.Fatal(err)
		}
		for w := range l.Windows() {
			n := l.WindowLen(w)
			for lo := uint64(0); lo < n; lo += orderedPlan.BatchSize {
				hi := min(lo+orderedPlan.BatchSize, n)
				out = append(out, item{prov: []batch.ProvRange{{Epoch: e, Split: int64(w), Lo: int64(lo), Hi: int64(hi)}}})
			}
		}
	}
	return out
}

// TestOrderedRunReorders: batches put in a random order, some twice, come
// out in the sequence's order, each once; the buffer never holds more
// than its bound, and one more is refused naming it.
func TestOrderedRunReorders(t *testing.T) {
	want := sequence(t, 2)
	r, err := newOrderedRun(orderedPlan, 2, len(want), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := append([]item(nil), want...)
	in = append(in, want[3], want[40], want[len(want)-1])
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	var got []item
	for _, x := range in {
		if _, err := r.put(x); err != nil {
			t.Fatal(err)
		}
		for {
			y, ok, err := r.take()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, y)
		}
	}
	if len(got) != len(want) || !r.done {
		t.Fatalf("%d batches out (done %v), want %d", len(got), r.done, len(want))
	}
	for i := range want {
		if got[i].prov[0] != want[i].prov[0] {
			t.Fatalf("batch %d: %+v, want %+v", i, got[i].prov[0], want[i].prov[0])
		}
	}
	if r.dups != 3 {
		t.Errorf("%d duplicates, want 3", r.dups)
	}
	// A bound of 2: the third batch ahead of the cursor is refused.
	r, _ = newOrderedRun(orderedPlan, 2, 2, nil, nil)
	for i, x := range want[1:4] {
		_, err := r.put(x)
		if (i == 2) != errors.Is(err, ErrReorderBound) {
			t.Fatalf("put %d with a bound of 2: %v", i, err)
		}
	}
}

// TestOrderedRunResume: from a checkpoint that covers the sequence up to
// any batch, the cursor starts at the next one.
func TestOrderedRunResume(t *testing.T) {
	want := sequence(t, 2)
	for _, at := range []int{0, 1, 4, 5, 6, 37, len(want)/2 - 1, len(want) / 2, len(want) - 1} {
		// Every epoch before the batch's is done; of its own, the batches
		// before it returned.
		e := want[at].prov[0].Epoch
		d := ranges.Delivered{DoneBefore: e, Returned: map[int64]map[int64]ranges.Set{}}
		for _, x := range want[:at] {
			if p := x.prov[0]; p.Epoch == e {
				d.Return(p.Epoch, p.Split, p.Lo, p.Hi)
			}
		}
		r, err := newOrderedRun(orderedPlan, 2, 10, &checkpoint{Delivered: d}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := want[at].prov[0]
		if r.cur.epoch != p.Epoch || r.cur.w != uint64(p.Split) || r.cur.k != uint64(p.Lo)/orderedPlan.BatchSize {
			t.Fatalf("after %d batches: cursor %+v, want %+v", at, r.cur, p)
		}
	}
}

// drain puts every item of in, in order, and takes what comes out.
func drain(t *testing.T, r *orderedRun, in []item) int {
	t.Helper()
	out := 0
	for _, x := range in {
		if _, err := r.put(x); err != nil {
			t.Fatal(err)
		}
		for {
			_, ok, err := r.take()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			out++
		}
	}
	return out
}

// TestOrderedRunAudit: the audit of a whole run matches the layout's
// digest in every epoch, also when the run is cut by a checkpoint (its
// digests carried over); a batch that lost one element (a worker that
// dropped it) makes its epoch's audit differ, one element short.
func TestOrderedRunAudit(t *testing.T) {
	want := sequence(t, 2)
	r, _ := newOrderedRun(orderedPlan, 2, 10, nil, nil)
	drain(t, r, want)
	a := r.report()
	if len(a) != 2 || !a[0].Match || !a[1].Match || a[0].Elements != orderedPlan.Elements {
		t.Fatalf("whole run: %+v", a)
	}
	// Cut after 61 batches, resumed from the checkpoint's digests.
	r, _ = newOrderedRun(orderedPlan, 2, 10, nil, nil)
	drain(t, r, want[:61])
	d := ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{}}
	for _, x := range want[:61] {
		p := x.prov[0]
		d.Return(p.Epoch, p.Split, p.Lo, p.Hi)
	}
	r2, err := newOrderedRun(orderedPlan, 2, 10, &checkpoint{Delivered: d, Audit: r.entries()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r2, want[61:])
	if b := r2.report(); len(b) != 2 || b[0] != a[0] || b[1] != a[1] {
		t.Fatalf("resumed: %+v, want %+v", b, a)
	}
	// One element dropped from batch 7.
	bad := append([]item(nil), want...)
	p := bad[7].prov[0]
	p.Hi--
	bad[7] = item{prov: []batch.ProvRange{p}}
	r, _ = newOrderedRun(orderedPlan, 2, 10, nil, nil)
	drain(t, r, bad)
	c := r.report()
	if c[0].Match || c[0].Elements != orderedPlan.Elements-1 || !c[1].Match {
		t.Fatalf("a dropped element: %+v", c)
	}
}

// TestExpandPosition: a position expands to the batches before it, which
// the reorder buffer's resume turns back into the same position.
func TestExpandPosition(t *testing.T) {
	spec := &pipeline.Spec{Source: pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 300, SplitSize: 10}},
		Ops: []pipeline.Op{{Batch: &pipeline.BatchOp{Size: 5}}}, Seed: 9, Order: pipeline.OrderDeterministic, OrderBlock: 8, OrderWindow: 3}
	plan, _, err := pipeline.OrderOf(spec)
	if err != nil || plan != orderedPlan {
		t.Fatalf("plan %+v, want %+v (%v)", plan, orderedPlan, err)
	}
	want := sequence(t, 2)
	for _, at := range []int{0, 3, 5, 17, len(want)/2 - 1, len(want) / 2, len(want) - 1} {
		p := want[at].prov[0]
		d, err := expandPosition(spec, orderPos{Epoch: p.Epoch, Window: uint64(p.Split), Batch: uint64(p.Lo) / plan.BatchSize})
		if err != nil {
			t.Fatal(err)
		}
		r, err := newOrderedRun(plan, 2, 10, &checkpoint{Delivered: d}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.cur.epoch != p.Epoch || r.cur.w != uint64(p.Split) || r.cur.k != uint64(p.Lo)/plan.BatchSize {
			t.Fatalf("batch %d: cursor %+v, want %+v", at, r.cur, p)
		}
	}
	if _, err := expandPosition(spec, orderPos{Window: 1 << 20}); err == nil {
		t.Fatal("a position past the epoch's windows expanded")
	}
}

// TestOrderedRunSkips: skipped ranges of the run's sequence (one across
// the epochs' boundary) are passed over, whether their batches arrived
// or not, and nothing else is; the audit leaves them out; a resume from
// within the run keeps skipping from the checkpoint.
func TestOrderedRunSkips(t *testing.T) {
	want := sequence(t, 2)
	half := int64(len(want) / 2)
	skips := [][2]int64{{0, 2}, {7, 11}, {half - 1, half + 3}}
	skipped := func(i int) bool {
		for _, s := range skips {
			if int64(i) >= s[0] && int64(i) < s[1] {
				return true
			}
		}
		return false
	}
	var kept []item
	for i, x := range want {
		if !skipped(i) {
			kept = append(kept, x)
		}
	}
	r, err := newOrderedRun(orderedPlan, 2, len(want), nil, skips)
	if err != nil {
		t.Fatal(err)
	}
	var got []item
	in := append([]item(nil), want...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	for _, x := range in {
		if _, err := r.put(x); err != nil {
			t.Fatal(err)
		}
		for {
			y, ok, err := r.take()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, y)
		}
	}
	if len(got) != len(kept) || !r.done {
		t.Fatalf("%d batches (done %v), want %d", len(got), r.done, len(kept))
	}
	for i := range kept {
		if got[i].prov[0] != kept[i].prov[0] {
			t.Fatalf("batch %d: %+v, want %+v", i, got[i].prov[0], kept[i].prov[0])
		}
	}
	if r.skipped != 10 {
		t.Errorf("%d skipped, want 10", r.skipped)
	}
	for _, a := range r.report() {
		if !a.Match {
			t.Errorf("audit with skips: %+v", a)
		}
	}
	// Resume after 12 batches of the run (6 kept: the first two skips
	// passed over).
	r, _ = newOrderedRun(orderedPlan, 2, len(want), nil, skips)
	n := drain(t, r, want[:12])
	if n != 6 || r.g != 12 {
		t.Fatalf("%d batches out, cursor at %d", n, r.g)
	}
	p := orderPos{Epoch: r.cur.epoch, Window: r.cur.w, Batch: r.cur.k}
	spec := &pipeline.Spec{Source: pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 300, SplitSize: 10}},
		Ops: []pipeline.Op{{Batch: &pipeline.BatchOp{Size: 5}}}, Seed: 9, Order: pipeline.OrderDeterministic, OrderBlock: 8, OrderWindow: 3}
	d, err := expandPosition(spec, p)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := newOrderedRun(orderedPlan, 2, len(want), &checkpoint{Delivered: d, Audit: r.entries(), Skips: r.skipRs}, r.skipRs)
	if err != nil {
		t.Fatal(err)
	}
	if m := drain(t, r2, want[12:]); m != len(kept)-6 {
		t.Fatalf("resumed: %d batches, want %d", m, len(kept)-6)
	}
	for _, a := range r2.report() {
		if !a.Match {
			t.Errorf("resumed audit with skips: %+v", a)
		}
	}
}
