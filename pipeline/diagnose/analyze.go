package diagnose

import (
	"fmt"
	"math"
	"strings"

	"github.com/feedmesh/feedmesh/pipeline"
)

// OpReport is one op's line of the diagnosis; the JSON names are those of
// `feedmesh diagnose --json`.
type OpReport struct {
	// Name and Index are as in pipeline.OpStats (Index -1: the source).
	Name  string `json:"name"`
	Index int    `json:"index"`
	// ElementsPerSecond is the op's own output rate in the run.
	ElementsPerSecond float64 `json:"elements_per_second"`
	// CPUSecondsPerElement is the op's busy time per element it produced
	// (summed over a parallel map's workers).
	CPUSecondsPerElement float64 `json:"cpu_seconds_per_element"`
	// BytesPerElement is the mean payload of the op's outputs.
	BytesPerElement float64 `json:"bytes_per_element"`
	// Parallelism is as configured; RecommendedParallelism is the LP's
	// (maps only; 1 for every other op).
	Parallelism            int `json:"parallelism"`
	RecommendedParallelism int `json:"recommended_parallelism"`
	// CriticalPathShare is the op's share of the time per output on the
	// constraint that bounds throughput as configured (its goroutine chain,
	// its own workers, or all cores): 0 for ops off that path, whose speed
	// does not matter.
	CriticalPathShare float64 `json:"critical_path_share"`
	// CPUSecondsPerOutput is the op's busy time per output of the
	// pipeline (1/R in the paper).
	CPUSecondsPerOutput float64 `json:"-"`
}

// Report is the diagnosis. The fields with JSON names are what
// `feedmesh diagnose --json` prints.
type Report struct {
	Ops []OpReport `json:"ops"`
	// BoundingOp names the op that bounds throughput as configured;
	// Bounding is its position in Ops and Why says why it bounds.
	BoundingOp string `json:"bounding_op"`
	Bounding   int    `json:"-"`
	Why        string `json:"-"`
	// PredictedElementsPerSecond is the model's throughput as configured
	// and RecommendedPredictedElementsPerSecond after the recommendation,
	// both in outputs of the last op per second (batches when it batches).
	PredictedElementsPerSecond            float64 `json:"predicted_elements_per_second"`
	RecommendedPredictedElementsPerSecond float64 `json:"recommended_predicted_elements_per_second"`
	// MeasuredElementsPerSecond is what the run delivered, in the same unit.
	MeasuredElementsPerSecond float64 `json:"-"`
	// RecommendedBinding says what bounds the recommended configuration.
	RecommendedBinding string `json:"-"`
	// CacheRecommendation is the largest cacheable prefix that fits the
	// memory budget, or nil; CacheWhy explains the choice or its absence.
	CacheRecommendation *Cache `json:"cache_recommendation"`
	CacheWhy            string `json:"-"`
	// Plan is the recommendation as changes to the spec.
	Plan Plan `json:"-"`
	// Cores is the budget the recommendation used.
	Cores float64 `json:"-"`
}

// Plan is the recommendation as changes to a spec: what Rewrite applies.
type Plan struct {
	// Parallelism maps the index in Spec.Ops of each map whose parallelism
	// changes to its new parallelism.
	Parallelism map[int]int
	// PrefetchAfter lists, increasing, the indices in Spec.Ops after which
	// a prefetch is inserted (-1: right after the source).
	PrefetchAfter []int
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Parallelism) == 0 && len(p.PrefetchAfter) == 0 }

// Analyze diagnoses one run of spec within budget b.
func Analyze(spec *pipeline.Spec, run Run, b Budget) (*Report, error) {
	if !(b.Cores > 0) || math.IsInf(b.Cores, 0) {
		return nil, fmt.Errorf("diagnose: cores must be > 0, got %v", b.Cores)
	}
	if b.MemoryBytes < 0 {
		return nil, fmt.Errorf("diagnose: memory must be >= 0, got %d", b.MemoryBytes)
	}
	if !(run.Seconds > 0) {
		return nil, fmt.Errorf("diagnose: the run took no time (%v s)", run.Seconds)
	}
	nodes, err := buildNodes(spec, run)
	if err != nil {
		return nil, err
	}
	cfg := configured(spec)
	for i, op := range spec.Ops {
		if tuned(spec, op) {
			cfg.par[i+1] = max(run.Ops[i+1].Parallelism, 1) // as the tuner had set it
		}
	}
	x, bind := predict(nodes, cfg, b.Cores)
	if math.IsInf(x, 1) {
		return nil, fmt.Errorf("diagnose: no op measured any busy time (were statistics off?)")
	}
	xStar := lpOptimum(nodes, b.Cores)
	rec := realise(nodes, xStar)
	xRec, recBind := predict(nodes, rec, b.Cores)

	r := &Report{
		PredictedElementsPerSecond:            x,
		RecommendedPredictedElementsPerSecond: xRec,
		MeasuredElementsPerSecond:             float64(run.Ops[len(run.Ops)-1].ElementsOut) / run.Seconds,
		Cores:                                 b.Cores,
	}
	share := shares(nodes, cfg, bind)
	for k, o := range run.Ops {
		row := OpReport{
			Name:                   o.Name,
			Index:                  o.Index,
			ElementsPerSecond:      float64(o.ElementsOut) / run.Seconds,
			Parallelism:            max(o.Parallelism, 1),
			RecommendedParallelism: rec.par[k],
			CriticalPathShare:      share[k],
			CPUSecondsPerOutput:    nodes[k].load,
		}
		if nodes[k].kind != mapOp {
			row.RecommendedParallelism = row.Parallelism
		}
		if o.ElementsOut > 0 {
			row.CPUSecondsPerElement = max(o.BusySeconds, 0) / float64(o.ElementsOut)
			row.BytesPerElement = float64(o.BytesOut) / float64(o.ElementsOut)
		}
		r.Ops = append(r.Ops, row)
	}
	r.Bounding, r.Why = explain(nodes, cfg, bind, x, b.Cores)
	r.BoundingOp = nodes[r.Bounding].name
	r.RecommendedBinding = describe(nodes, recBind, b.Cores)
	r.Plan = planOf(spec, rec)
	r.CacheRecommendation, r.CacheWhy = recommendCache(spec, run, nodes, b)
	return r, nil
}

// shares gives each node its share of the binding constraint's time per
// output.
func shares(nodes []node, c config, b binding) []float64 {
	s := make([]float64, len(nodes))
	if b.kind == bindParallel {
		s[b.nodes[0]] = 1
		return s
	}
	total := 0.0
	for _, k := range b.nodes {
		total += nodes[k].load
	}
	if total <= 0 {
		return s
	}
	for _, k := range b.nodes {
		if b.kind == bindCores || !(nodes[k].kind == mapOp && c.par[k] > 1) {
			s[k] = nodes[k].load / total
		}
	}
	return s
}

// heaviest is the node of ns with the largest load (the first on ties).
func heaviest(nodes []node, ns []int) int {
	best := ns[0]
	for _, k := range ns {
		if nodes[k].load > nodes[best].load {
			best = k
		}
	}
	return best
}

// explain names the op that bounds throughput x and says why.
func explain(nodes []node, c config, b binding, x, cores float64) (int, string) {
	k := heaviest(nodes, b.nodes)
	ms := func(s float64) string { return fmt.Sprintf("%.3g ms", s*1e3) }
	switch b.kind {
	case bindParallel:
		return k, fmt.Sprintf("it runs at parallelism %d and needs %s of CPU per output: at most %d/%s = %.4g outputs/s", c.par[k], ms(nodes[k].load), c.par[k], ms(nodes[k].load), x)
	case bindSegment:
		var others []string
		total := 0.0
		for _, j := range b.nodes {
			total += nodes[j].load
		}
		for _, j := range b.nodes {
			if j != k && nodes[j].load > 0.05*total {
				others = append(others, nodes[j].name)
			}
		}
		if len(others) == 0 {
			what := "it cannot run in parallel"
			if nodes[k].kind == mapOp {
				what = "it runs at parallelism 1"
			}
			return k, fmt.Sprintf("%s and needs %s per output: at most %.4g outputs/s", what, ms(nodes[k].load), x)
		}
		return k, fmt.Sprintf("it runs in one goroutine with %s (no prefetch or parallel map between them): together %s per output, at most %.4g outputs/s",
			strings.Join(others, ", "), ms(total), x)
	default:
		total := 0.0
		for _, n := range nodes {
			total += n.load
		}
		return k, fmt.Sprintf("the pipeline needs %s of CPU per output and has %g cores: at most %.4g outputs/s; this op takes %.0f %% of that CPU", ms(total), cores, x, 100*nodes[k].load/total)
	}
}

// describe says in a few words what bounds a configuration.
func describe(nodes []node, b binding, cores float64) string {
	k := heaviest(nodes, b.nodes)
	switch b.kind {
	case bindParallel:
		return fmt.Sprintf("the workers of %s", nodes[k].name)
	case bindSegment:
		if len(b.nodes) == 1 {
			return fmt.Sprintf("%s, which cannot run in parallel", nodes[k].name)
		}
		return fmt.Sprintf("the goroutine that runs %s", nodeNames(nodes, b.nodes))
	default:
		return fmt.Sprintf("all %g cores", cores)
	}
}

func nodeNames(nodes []node, ns []int) string {
	var s []string
	for _, k := range ns {
		s = append(s, nodes[k].name)
	}
	return strings.Join(s, ", ")
}

// planOf lists what the recommended configuration changes in the spec.
func planOf(spec *pipeline.Spec, rec config) Plan {
	p := Plan{Parallelism: map[int]int{}}
	for i, op := range spec.Ops {
		if op.Map == nil || tuned(spec, op) {
			continue // the pipeline sets a tuned map's parallelism itself
		}
		cur := max(op.Map.Parallelism, 1)
		if rec.par[i+1] != cur {
			p.Parallelism[i] = rec.par[i+1]
		}
	}
	for k, cut := range rec.cutAfter {
		if cut {
			p.PrefetchAfter = append(p.PrefetchAfter, k-1)
		}
	}
	if len(p.Parallelism) == 0 {
		p.Parallelism = nil
	}
	return p
}

// tuned reports whether the pipeline tunes op's parallelism itself
// (`parallelism: auto`, or a map of a spec with `autotune: true`).
func tuned(spec *pipeline.Spec, op pipeline.Op) bool {
	return op.Map != nil && (op.Map.Parallelism == pipeline.ParallelismAuto || spec.Autotune)
}
