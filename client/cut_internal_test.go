package client

import (
	"context"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// A cut job's client part takes single elements marked with the cut; a
// marked frame of several source elements, one without provenance, or
// one of another cut ends the iteration with an error naming the worker,
// instead of being fed to the suffix as one element. A frame without the
// mark (a batch the whole pipeline made: the job was cut while it ran)
// passes through to Next.
func TestPullCutRefusesBatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		prov []batch.ProvRange
		cut  int
		want string
	}{
		{"batch", []batch.ProvRange{{Epoch: 0, Split: 3, Lo: 0, Hi: 2}}, 2, "worker w1 sent a batch of 2 source elements"},
		{"two-splits", []batch.ProvRange{{Split: 3, Lo: 0, Hi: 1}, {Split: 4, Lo: 0, Hi: 1}}, 2, "a batch of 2 source elements"},
		{"no-provenance", nil, 2, "a batch of 0 source elements"},
		{"other-cut", []batch.ProvRange{{Epoch: 0, Split: 3, Lo: 0, Hi: 1}}, 3, "cut after 3 ops, not one element cut after 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := &Iterator{items: make(chan item, 1), budget: transport.NewByteBudget("PrefetchBytes", 1<<20),
				stats: Stats{Workers: map[string]WorkerStats{}}}
			r := &cutRun{cut: 2, out: make(chan cutOut, 1), pending: make(chan item, 1)}
			it.ctx, it.cancel = context.WithCancel(context.Background())
			defer it.cancel()
			it.items <- item{b: Batch{Element: tensor.Element{Tensors: []tensor.Tensor{tensor.ScalarInt64("value", 1)}}, Worker: "w1"}, prov: tc.prov, cut: tc.cut}
			_, err := it.pullCut(context.Background(), r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pullCut: %v, want an error saying %q", err, tc.want)
			}
			if it.err == nil || it.ctx.Err() == nil {
				t.Errorf("the iteration goes on after a bad frame (err %v)", it.err)
			}
		})
	}
	// A whole batch passes through; the marked element after it goes to
	// the suffix, with its provenance.
	it := &Iterator{items: make(chan item, 2), budget: transport.NewByteBudget("PrefetchBytes", 1<<20),
		stats: Stats{Workers: map[string]WorkerStats{}}}
	r := &cutRun{cut: 2, out: make(chan cutOut, 1), pending: make(chan item, 1)}
	whole := []batch.ProvRange{{Epoch: 1, Split: 2, Lo: 0, Hi: 8}}
	it.items <- item{b: Batch{Worker: "w0"}, prov: whole, wire: 300}
	it.items <- item{b: Batch{Worker: "w1"}, prov: []batch.ProvRange{{Epoch: 1, Split: 7, Lo: 5, Hi: 6}}, wire: 40, cut: 2}
	e, err := it.pullCut(context.Background(), r)
	if err != nil || e.Epoch != 1 || e.Split != 7 || e.Index != 5 || r.wire != 40 {
		t.Fatalf("pullCut: %+v, %v (wire %d)", e, err, r.wire)
	}
	if ws := it.stats.Workers["w1"]; ws.Batches != 0 || ws.Elements != 1 || ws.CutElements != 1 || ws.WireBytes != 40 {
		t.Errorf("w1's figures %+v: want the element it shipped counted as one cut element, not a batch", ws)
	}
	select {
	case o := <-r.out:
		if o.b.Worker != "w0" || o.wire != 300 || len(o.prov) != 1 || o.prov[0] != whole[0] {
			t.Fatalf("passed through: %+v, want w0's batch with its provenance and wire bytes", o)
		}
	default:
		t.Fatal("the whole batch did not pass through the suffix")
	}
	if ws := it.stats.Workers["w0"]; ws.Batches != 1 || ws.WireBytes != 300 {
		t.Errorf("w0's figures %+v: the batch that passed through is not counted", ws)
	}
}
