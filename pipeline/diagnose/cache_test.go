package diagnose

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

func TestCacheRecommendation(t *testing.T) {
	// An epoch is 1000 source elements of 8 bytes; the cost map keeps
	// them as they are (8 KB), the cast makes them 800 bytes (800 KB),
	// the shuffle ends what can be cached.
	spec := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cost", cpuCost, 1).
		Map("cast", fn.Args{"tensor": "value", "dtype": "float64"}, 1).
		Prefetch(2).
		Shuffle(100, 1).
		Batch(10, false)
	// The run saw half an epoch.
	run := runOf(spec, 1000, st{500, 0.01, 8}, st{500, 0.5, 8}, st{500, 0.1, 800}, st{500, 0, 800}, st{500, 0.01, 800}, st{50, 0.01, 8000})
	for _, c := range []struct {
		name   string
		memory int64
		after  int // -2: none
		bytes  int64
		why    string
	}{
		{"fits the cost map's output, not the cast's", 100_000, 0, 8000, "these do not: after map(cast): 800.0 KB"},
		{"fits the cast's output", 1_000_000, 1, 800_000, "nothing after ops[3] can be cached (shuffle is random)"},
		{"fits nothing", 1000, -2, 0, "no cacheable prefix fits 1.0 KB"},
		{"no budget", 0, -2, 0, "no memory budget"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Analyze(spec, run, Budget{Cores: 2, MemoryBytes: c.memory})
			if err != nil {
				t.Fatal(err)
			}
			got := r.CacheRecommendation
			if !strings.Contains(r.CacheWhy, c.why) {
				t.Errorf("why = %q, want it to contain %q", r.CacheWhy, c.why)
			}
			if c.after == -2 {
				if got != nil {
					t.Fatalf("recommended %+v, want none", got)
				}
				return
			}
			if got == nil || got.AfterIndex != c.after || got.Bytes != c.bytes || got.MemoryBytes != c.memory {
				t.Fatalf("recommended %+v, want after ops[%d], %d bytes", got, c.after, c.bytes)
			}
		})
	}

	// Once the cost map's output is cached, only the cast (0.1 s over 50
	// outputs), the shuffle and the batch cost anything.
	r, _ := Analyze(spec, run, Budget{Cores: 2, MemoryBytes: 100_000})
	want := lpOptimum([]node{{load: 0}, {load: 0, kind: mapOp}, {load: 0.1 / 50, kind: mapOp}, {kind: prefetchOp}, {load: 0.01 / 50}, {load: 0.01 / 50}}, 2)
	if !near(r.CacheRecommendation.PredictedElementsPerSecond, want) || !(want > r.RecommendedPredictedElementsPerSecond) {
		t.Errorf("predicted with the cache %v, want %v (> %v without)", r.CacheRecommendation.PredictedElementsPerSecond, want, r.RecommendedPredictedElementsPerSecond)
	}
}

func TestCacheStopsAtRandomAndUnknown(t *testing.T) {
	for _, c := range []struct {
		spec *pipeline.Spec
		why  string
	}{
		{pipeline.NewSpec(pipeline.FromRange(0, 10, 1)).Map("random_flip", nil, 1), "map(random_flip) is random"},
		{pipeline.NewSpec(pipeline.FromRange(0, 10, 1)).Map("my_own", nil, 1), "map(my_own) is random or unknown"},
		{pipeline.NewSpec(pipeline.FromRange(0, 10, 1)).Repeat(2), "repeat"},
		{pipeline.NewSpec(pipeline.FromRange(0, 10, 1)).Map("normalize", map[string]any{"tensor": "value", "random_flip": true}, 1), "map(normalize) is random"},
	} {
		run := runOf(c.spec, 10, st{10, 0.01, 8}, st{10, 0.01, 8})
		r, err := Analyze(c.spec, run, Budget{Cores: 1, MemoryBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if r.CacheRecommendation == nil || r.CacheRecommendation.AfterIndex != -1 || !strings.Contains(r.CacheWhy, c.why) {
			t.Errorf("%s: %+v, %q: want the source only, because %q", c.spec.Ops[0].Name(), r.CacheRecommendation, r.CacheWhy, c.why)
		}
	}
	// Without the epoch's size there is nothing to compare with the budget.
	spec := pipeline.NewSpec(pipeline.FromRange(0, 10, 1))
	r, _ := Analyze(spec, runOf(spec, 0, st{10, 0.01, 8}), Budget{Cores: 1, MemoryBytes: 1 << 30})
	if r.CacheRecommendation != nil || !strings.Contains(r.CacheWhy, "unknown") {
		t.Errorf("unknown epoch: %+v, %q", r.CacheRecommendation, r.CacheWhy)
	}
}
