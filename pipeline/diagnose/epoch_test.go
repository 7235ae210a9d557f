package diagnose

import (
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
)

func TestEpochSourceElements(t *testing.T) {
	files := pipeline.NewSpec(pipeline.FromFiles("lines", "x.txt"))
	taken := pipeline.NewSpec(pipeline.FromFiles("lines", "x.txt")).Take(5)
	for _, c := range []struct {
		name      string
		spec      *pipeline.Spec
		o         Observed
		n         int64
		estimated bool
	}{
		{"range", pipeline.NewSpec(pipeline.FromRange(0, 10, 1)), Observed{}, 10, false},
		{"range step 3", pipeline.NewSpec(pipeline.FromRange(0, 10, 3)), Observed{}, 4, false},
		{"range down", pipeline.NewSpec(pipeline.FromRange(10, 0, -4)), Observed{}, 3, false},
		{"empty range", pipeline.NewSpec(pipeline.FromRange(5, 5, 1)), Observed{}, 0, false},
		{"synthetic", pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 77})), Observed{}, 77, false},
		{"files read whole", files, Observed{SourceElements: 40, SourceBytes: 400, Ended: true, FileBytes: 999}, 40, false},
		{"files read in part", files, Observed{SourceElements: 40, SourceBytes: 400, FileBytes: 1000}, 100, true},
		{"files cut by take", taken, Observed{SourceElements: 5, SourceBytes: 50, Ended: true, FileBytes: 1000}, 100, true},
		{"files unknown", files, Observed{SourceElements: 40, SourceBytes: 400}, 0, false},
	} {
		n, est := EpochSourceElements(c.spec, c.o)
		if n != c.n || est != c.estimated {
			t.Errorf("%s: %d (estimated %v), want %d (%v)", c.name, n, est, c.n, c.estimated)
		}
	}
}
