package compose

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestTakeSkipUnderKill: a DYNAMIC job's take or skip selects a window of
// the epoch's order (split order, then index in the split), whichever
// worker reads it: under exactly-once each element of the window arrives
// exactly once per epoch and none outside it, through a checkpoint and a
// resume and a worker node killed in the resumed part; under at-most-once
// none outside it, none twice, and the loss reported is exactly the
// window's elements that did not arrive; with a local worker (a fraction,
// offload local) too. Element by element (check).
func TestTakeSkipUnderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster and a kill per case")
	}
	cases := []jobspec.Combo{
		{Sharding: jobspec.Dynamic, Delivery: jobspec.ExactlyOnce, Offload: jobspec.OffloadRemote, TakeSkip: jobspec.ValTake, Resume: true},
		{Sharding: jobspec.Dynamic, Delivery: jobspec.ExactlyOnce, Offload: jobspec.OffloadRemote, TakeSkip: jobspec.ValSkip, Resume: true, Epochs: 2},
		{Sharding: jobspec.Dynamic, TakeSkip: jobspec.ValTake, Resume: true}, // the defaults: exactly-once, workers and offload auto
		{Sharding: jobspec.Dynamic, Delivery: jobspec.ExactlyOnce, Offload: "0.5", TakeSkip: jobspec.ValTake, Resume: true},
		{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Offload: jobspec.OffloadRemote, TakeSkip: jobspec.ValTake},
		{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Workers: "2", TakeSkip: jobspec.ValSkip},
		{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Offload: jobspec.OffloadLocal, TakeSkip: jobspec.ValSkip},
	}
	c := testcluster.Start(t, 3)
	cl := dial(t, c, 0)
	for i, combo := range cases {
		if err := combo.Check(); err != nil {
			t.Fatalf("%v: refused: %v", combo, err)
		}
		g := combo.Guarantee()
		if !g.Window || g.Subset {
			t.Fatalf("%v: guarantee %+v, want the window of the epoch's order", combo, g)
		}
		if combo.Delivery == jobspec.AtMostOnce && !g.LossCounted {
			t.Fatalf("%v: at-most-once without an exact loss count: %+v", combo, g)
		}
		row := 60 + i
		t.Run(fmt.Sprintf("case%d", i), func(t *testing.T) {
			t.Logf("%v; guarantee: %s", combo, g)
			runRow(t, c, cl, row, combo)
		})
		if t.Failed() {
			return
		}
	}
	t.Run("cut", func(t *testing.T) { takeUnderCut(t, cl) })
}

// takeUnderCut: a cut (offload_boundary) counts the user's ops, take and
// skip included; the job runs with them applied to the source and the
// cut moved back past them, and delivers the window exactly once.
func takeUnderCut(t *testing.T, cl *client.Client) {
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 500, SplitSize: 10}})
	spec.Cost(0, 200).Skip(50).Take(200).Cost(0, 100).Batch(8, false)
	it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: "take-cut", Sharding: client.Dynamic,
		Offload: client.OffloadRemote, Workers: client.AllWorkers, OffloadBoundary: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	g := newGot()
	read(t, it, &g, -1, nil)
	all := g.total()
	for v := int64(50); v < 250; v++ {
		if all[v] != 1 {
			t.Fatalf("element %d arrived %d times, want once", v, all[v])
		}
	}
	if len(all) != 200 {
		t.Fatalf("%d distinct elements, want the 200 of [50, 250)", len(all))
	}
	st := it.Stats()
	if st.Offload == nil || !strings.Contains(st.Offload.Reason, "offload_boundary 2") {
		t.Fatalf("offload %+v: want the cut after the folded spec's 2 ops (cost, cost)", st.Offload)
	}
}
