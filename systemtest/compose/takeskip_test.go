package compose

import (
	"fmt"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
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
			break
		}
	}
}
