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
	r, err := newOrderedRun(orderedPlan, 2, len(want), nil)
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
	r, _ = newOrderedRun(orderedPlan, 2, 2, nil)
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
		r, err := newOrderedRun(orderedPlan, 2, 10, &checkpoint{Delivered: d})
		if err != nil {
			t.Fatal(err)
		}
		p := want[at].prov[0]
		if r.cur.epoch != p.Epoch || r.cur.w != uint64(p.Split) || r.cur.k != uint64(p.Lo)/orderedPlan.BatchSize {
			t.Fatalf("after %d batches: cursor %+v, want %+v", at, r.cur, p)
		}
	}
}
