package diagnose

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

// st is one op's constructed statistics: elements out, busy seconds,
// bytes per element.
type st struct {
	out   int64
	busy  float64
	bytes float64
}

// runOf builds a Run of one second from constructed statistics; names and
// parallelism come from the spec, as the engine gives them.
func runOf(spec *pipeline.Spec, epoch int64, ops ...st) Run {
	r := Run{Seconds: 1, EpochSourceElements: epoch}
	for k, o := range ops {
		s := pipeline.OpStats{Name: "source", Index: k - 1, ElementsOut: o.out, BusySeconds: o.busy,
			BytesOut: int64(o.bytes * float64(o.out)), Parallelism: 1}
		if k > 0 {
			op := spec.Ops[k-1]
			s.Name = op.Name()
			if op.Map != nil {
				s.Name = "map(" + op.Map.Fn + ")"
				s.Parallelism = max(op.Map.Parallelism, 1)
			}
			s.ElementsIn = ops[k-1].out
		}
		r.Ops = append(r.Ops, s)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b), 1) }

var cpuCost = fn.Args{"cpu_us": 100}

func TestAnalyze(t *testing.T) {
	oneBottleneck := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cast", fn.Args{"tensor": "value", "dtype": "float32"}, 1).
		Map("cost", cpuCost, 1).
		Batch(10, false)
	sharing := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cast", fn.Args{"tensor": "value", "dtype": "float32"}, 1).
		Map("cost", cpuCost, 1)
	sourceBound := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cost", cpuCost, 4).
		Prefetch(2)
	starved := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Cost(0, 300).
		Cost(200, 0)

	for _, c := range []struct {
		name     string
		spec     *pipeline.Spec
		stats    []st
		cores    float64
		bounding int // index in Ops
		share    []float64
		x, xRec  float64
		plan     Plan
	}{
		{
			// 100 batches: the cost map needs 10 ms per batch, everything
			// else 0.4 ms, all in the consumer's goroutine.
			name:  "one bottleneck",
			spec:  oneBottleneck,
			stats: []st{{1000, 0.01, 8}, {1000, 0.02, 4}, {1000, 1.0, 4}, {100, 0.01, 40}},
			cores: 4, bounding: 2,
			share: []float64{0.01 / 1.04, 0.02 / 1.04, 1 / 1.04, 0.01 / 1.04},
			x:     100 / 1.04, xRec: 4 / 0.0104,
			// θ = 384.6 × 10 ms = 3.85 cores: 4 workers; the cast stays at 1.
			plan: Plan{Parallelism: map[int]int{1: 4}, PrefetchAfter: []int{2}},
		},
		{
			// Two maps share 4 cores: 10 and 30 ms per output, 2 ms for
			// the source. The LP gives the second map 2.86 cores (3
			// workers) and the first 0.95 (1), but the first then shares
			// its goroutine with the source, which would make it 12 ms:
			// a prefetch splits them.
			name:  "two ops sharing cores",
			spec:  sharing,
			stats: []st{{100, 0.2, 8}, {100, 1, 4}, {100, 3, 4}},
			cores: 4, bounding: 2,
			share: []float64{0.2 / 4.2, 1 / 4.2, 3 / 4.2},
			x:     100 / 4.2, xRec: 4 / 0.042,
			plan: Plan{Parallelism: map[int]int{1: 3}, PrefetchAfter: []int{-1, 1}},
		},
		{
			// Two maps share 2 cores: the second gets 1.5 of them (2 workers).
			name:  "two ops sharing two cores",
			spec:  sharing,
			stats: []st{{100, 0, 8}, {100, 1, 4}, {100, 3, 4}},
			cores: 2, bounding: 2,
			share: []float64{0, 0.25, 0.75},
			x:     25, xRec: 50,
			plan: Plan{Parallelism: map[int]int{1: 2}, PrefetchAfter: []int{1}},
		},
		{
			// The source takes 1 ms per element and cannot run in
			// parallel; the map has 4 workers for 1 ms each. One worker
			// keeps up with the source if a prefetch runs the source in
			// its own goroutine.
			name:  "source bound",
			spec:  sourceBound,
			stats: []st{{1000, 1, 8}, {1000, 1, 8}, {1000, 0, 8}},
			cores: 8, bounding: 0,
			share: []float64{1, 0, 0},
			x:     1000, xRec: 1000,
			plan: Plan{Parallelism: map[int]int{0: 1}, PrefetchAfter: []int{-1}},
		},
		{
			// A 300 µs wait and a 200 µs computation in one goroutine:
			// a prefetch between them overlaps them.
			name:  "prefetch starved",
			spec:  starved,
			stats: []st{{1000, 0, 8}, {1000, 0.3, 8}, {1000, 0.2, 8}},
			cores: 2, bounding: 1,
			share: []float64{0, 0.6, 0.4},
			x:     2000, xRec: 1000 / 0.3,
			plan: Plan{PrefetchAfter: []int{0, 1}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Analyze(c.spec, runOf(c.spec, 1000, c.stats...), Budget{Cores: c.cores})
			if err != nil {
				t.Fatal(err)
			}
			if r.Bounding != c.bounding || r.BoundingOp != r.Ops[c.bounding].Name {
				t.Errorf("bounding = %d %q, want %d (%s)", r.Bounding, r.BoundingOp, c.bounding, r.Why)
			}
			for k, want := range c.share {
				if !near(r.Ops[k].CriticalPathShare, want) {
					t.Errorf("ops[%d] critical path share = %v, want %v", k-1, r.Ops[k].CriticalPathShare, want)
				}
			}
			if !near(r.PredictedElementsPerSecond, c.x) || !near(r.RecommendedPredictedElementsPerSecond, c.xRec) {
				t.Errorf("predicted %v → %v, want %v → %v", r.PredictedElementsPerSecond, r.RecommendedPredictedElementsPerSecond, c.x, c.xRec)
			}
			if !reflect.DeepEqual(r.Plan, c.plan) {
				t.Errorf("plan = %+v, want %+v", r.Plan, c.plan)
			}
			for i, p := range c.plan.Parallelism {
				if got := r.Ops[i+1].RecommendedParallelism; got != p {
					t.Errorf("ops[%d] recommended parallelism %d, want %d", i, got, p)
				}
			}
			if r.Why == "" {
				t.Error("no reason given for the bounding op")
			}
		})
	}
}

func TestAnalyzeRowsAndErrors(t *testing.T) {
	spec := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).Map("cost", cpuCost, 2).Batch(10, false)
	run := runOf(spec, 1000, st{1000, 0.1, 8}, st{1000, 2, 8}, st{100, 0.01, 80})
	run.Seconds = 2
	r, err := Analyze(spec, run, Budget{Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := r.Ops[1]
	if !near(m.ElementsPerSecond, 500) || !near(m.CPUSecondsPerElement, 0.002) || !near(m.BytesPerElement, 8) || m.Parallelism != 2 {
		t.Errorf("map row = %+v", m)
	}
	if !near(r.MeasuredElementsPerSecond, 50) || !near(r.Ops[2].BytesPerElement, 80) {
		t.Errorf("measured %v outputs/s, batch row %+v", r.MeasuredElementsPerSecond, r.Ops[2])
	}

	for _, c := range []struct {
		name string
		run  Run
		b    Budget
	}{
		{"no cores", run, Budget{}},
		{"negative memory", run, Budget{Cores: 1, MemoryBytes: -1}},
		{"wrong op count", Run{Seconds: 1, Ops: run.Ops[:2]}, Budget{Cores: 1}},
		{"no output", runOf(spec, 0, st{0, 0, 0}, st{0, 0, 0}, st{0, 0, 0}), Budget{Cores: 1}},
		{"no time", Run{Ops: run.Ops}, Budget{Cores: 1}},
		{"statistics off", runOf(spec, 0, st{10, 0, 8}, st{10, 0, 8}, st{1, 0, 8}), Budget{Cores: 1}},
	} {
		if _, err := Analyze(spec, c.run, c.b); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestRealisedPlanMeetsTheLP: on random pipelines, the integer
// parallelism and prefetches the recommendation picks reach the LP's
// optimum to within Slack, and the optimum is never below the throughput
// as configured.
func TestRealisedPlanMeetsTheLP(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(7)
		nodes := make([]node, n)
		cfg := config{par: make([]int, n), cutAfter: make([]bool, n)}
		for k := range nodes {
			nodes[k].load = rng.ExpFloat64() * 1e-3
			if rng.IntN(4) == 0 {
				nodes[k].load = 0
			}
			cfg.par[k] = 1
			if k > 0 {
				nodes[k].kind = kind(rng.IntN(3))
				if nodes[k].kind == mapOp {
					cfg.par[k] = 1 + rng.IntN(4)
				}
			}
		}
		cores := float64(1 + rng.IntN(16))
		x, _ := predict(nodes, cfg, cores)
		xStar := lpOptimum(nodes, cores)
		if math.IsInf(x, 1) {
			continue
		}
		xRec, _ := predict(nodes, realise(nodes, xStar), cores)
		if xRec > xStar*(1+1e-9) || xRec < xStar/(1+Slack)*(1-1e-9) || xStar < x*(1-1e-9) {
			t.Fatalf("trial %d: %+v on %g cores: configured %v, LP %v, realised %v", trial, nodes, cores, x, xStar, xRec)
		}
	}
}
