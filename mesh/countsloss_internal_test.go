package mesh

import (
	"testing"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/pipeline"
)

// TestCountsLoss: the proposer has an at-most-once job count its loss
// exactly when it is plain DYNAMIC and its pipeline has no take or skip
// (a census runs a dead worker's splits again to count them).
func TestCountsLoss(t *testing.T) {
	spec := func(take bool) *pipeline.Spec {
		s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 100, SplitSize: 10}})
		if take {
			s.Take(5)
		}
		return s
	}
	for _, c := range []struct {
		name string
		o    fsm.JobOptions
		take bool
		want bool
	}{
		{"at-most-once dynamic", fsm.JobOptions{Sharding: splits.Dynamic, Delivery: fsm.DeliveryAtMostOnce}, false, true},
		{"stored at-most-once", fsm.JobOptions{Sharding: splits.Dynamic}, false, true},
		{"with take", fsm.JobOptions{Sharding: splits.Dynamic}, true, false},
		{"exactly-once", fsm.JobOptions{Sharding: splits.Dynamic, Delivery: fsm.DeliveryExactlyOnce}, false, false},
		{"share", fsm.JobOptions{Sharding: splits.Dynamic, Share: true}, false, false},
		{"coordinated", fsm.JobOptions{Sharding: splits.Dynamic, Coordinated: true}, false, false},
		{"off", fsm.JobOptions{Sharding: splits.Off}, false, false},
		{"static", fsm.JobOptions{Sharding: splits.Static}, false, false},
	} {
		if got := countsLoss(c.o, spec(c.take)); got != c.want {
			t.Errorf("%s: counts loss %v, want %v", c.name, got, c.want)
		}
	}
}
