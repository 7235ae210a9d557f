package diagnose

import (
	"fmt"
	"math"

	"github.com/feedmesh/feedmesh/pipeline"
)

// The autotuner (pipeline/autotune.go) asks Allocate, through TunerFor,
// for the parallelism of the maps it drives, every interval, from that
// interval's statistics. A running pipeline cannot insert prefetches, so
// unlike Analyze's recommendation the allocation keeps the spec's
// structure.

func init() { pipeline.RegisterTuner(TunerFor) }

// TunerFor is the pipeline.Tuner of spec: Allocate over each interval's
// statistics.
func TunerFor(spec *pipeline.Spec) pipeline.Tuner {
	return func(window pipeline.Stats, cores float64) (map[int]int, error) {
		return Allocate(spec, Run{Ops: window.Ops, Seconds: window.Elapsed.Seconds()}, cores)
	}
}

// Allocate returns a parallelism for every map of spec (by index in
// spec.Ops): what the loads measured in run need to reach the best
// throughput within cores that the spec's structure allows, that is
// Plumber's LP optimum lowered to what its chains of sequential ops (as
// configured, no prefetch inserted) can deliver, realised as in Analyze
// (⌈x·load/(1+Slack)⌉ workers per map). A map that measured no work gets 1.
func Allocate(spec *pipeline.Spec, run Run, cores float64) (map[int]int, error) {
	if !(cores > 0) || math.IsInf(cores, 0) {
		return nil, fmt.Errorf("diagnose: cores must be > 0, got %v", cores)
	}
	if !(run.Seconds > 0) {
		return nil, fmt.Errorf("diagnose: the run took no time (%v s)", run.Seconds)
	}
	nodes, err := buildNodes(spec, run)
	if err != nil {
		return nil, err
	}
	x := lpOptimum(nodes, cores)
	structure := configured(spec)
	for k, n := range nodes {
		if n.kind == mapOp {
			structure.par[k] = pipeline.MaxParallelism // a tuned map runs in its own goroutines
		}
	}
	if xs, _ := predict(nodes, structure, math.Inf(1)); xs < x {
		x = xs
	}
	if math.IsInf(x, 1) || !(x > 0) {
		return nil, fmt.Errorf("diagnose: no op measured any busy time")
	}
	rec := realise(nodes, x)
	out := map[int]int{}
	for i, op := range spec.Ops {
		if op.Map != nil {
			out[i] = rec.par[i+1]
		}
	}
	return out, nil
}
