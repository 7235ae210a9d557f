package mesh

import (
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
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
		o    jobspec.Options
		take bool
		want bool
	}{
		{"at-most-once dynamic", jobspec.Options{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce}, false, true},
		{"with take", jobspec.Options{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce}, true, false},
		{"exactly-once", jobspec.Options{Sharding: jobspec.Dynamic}, false, false},
		{"share", jobspec.Options{Sharding: jobspec.Dynamic, Share: true}, false, false},
		{"coordinated", jobspec.Options{Coordinated: true, NumConsumers: 2, Delivery: jobspec.AtMostOnce}, false, false},
		{"off", jobspec.Options{Sharding: jobspec.Off}, false, false},
		{"static", jobspec.Options{Sharding: jobspec.Static}, false, false},
	} {
		o, err := jobspec.StoredJob(c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := countsLoss(o, spec(c.take)); got != c.want {
			t.Errorf("%s: counts loss %v, want %v", c.name, got, c.want)
		}
	}
}
