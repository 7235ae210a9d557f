package client

import (
	"context"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// A cut job's client part takes single elements; a frame of several
// source elements (a node that ran the whole pipeline), or one without
// provenance, ends the iteration with an error naming the worker, instead
// of being fed to the suffix as one element.
func TestPullCutRefusesBatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		prov []batch.ProvRange
		want string
	}{
		{"batch", []batch.ProvRange{{Epoch: 0, Split: 3, Lo: 0, Hi: 2}}, "worker w1 sent a batch of 2 source elements"},
		{"two-splits", []batch.ProvRange{{Split: 3, Lo: 0, Hi: 1}, {Split: 4, Lo: 0, Hi: 1}}, "a batch of 2 source elements"},
		{"no-provenance", nil, "a batch of 0 source elements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := &Iterator{items: make(chan item, 1), budget: transport.NewByteBudget("PrefetchBytes", 1<<20),
				stats: Stats{Workers: map[string]WorkerStats{}}, cut: &cutRun{cut: 2}}
			it.ctx, it.cancel = context.WithCancel(context.Background())
			defer it.cancel()
			it.items <- item{b: Batch{Element: tensor.Element{Tensors: []tensor.Tensor{tensor.ScalarInt64("value", 1)}}, Worker: "w1"}, prov: tc.prov}
			_, err := it.pullCut(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pullCut: %v, want an error saying %q", err, tc.want)
			}
			if it.err == nil || it.ctx.Err() == nil {
				t.Errorf("the iteration goes on after a bad frame (err %v)", it.err)
			}
		})
	}
	// One element passes, with its provenance.
	it := &Iterator{items: make(chan item, 1), budget: transport.NewByteBudget("PrefetchBytes", 1<<20),
		stats: Stats{Workers: map[string]WorkerStats{}}, cut: &cutRun{cut: 2}}
	it.items <- item{b: Batch{Worker: "w1"}, prov: []batch.ProvRange{{Epoch: 1, Split: 7, Lo: 5, Hi: 6}}, wire: 40}
	e, err := it.pullCut(context.Background())
	if err != nil || e.Epoch != 1 || e.Split != 7 || e.Index != 5 || it.cut.wire != 40 || it.cut.worker != "w1" {
		t.Fatalf("pullCut: %+v, %v (wire %d, worker %q)", e, err, it.cut.wire, it.cut.worker)
	}
}
