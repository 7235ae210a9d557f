package diagnose

import (
	"fmt"
	"math"

	"github.com/feedmesh/feedmesh/pipeline"
)

// Budget is what the recommendation may use.
type Budget struct {
	// Cores is the number of cores the pipeline may use (> 0): the LP's
	// n_c. On a machine with few cores, a larger budget with ops that
	// sleep emulates more cores (see the package comment).
	Cores float64
	// MemoryBytes is what a cache may hold; 0 asks for no cache
	// recommendation.
	MemoryBytes int64
}

// Run is what one bounded run of a pipeline measured.
type Run struct {
	// Ops are the run's per-op statistics (pipeline.Stats.Ops): the source
	// first, then one per op of the spec, in order.
	Ops []pipeline.OpStats
	// Seconds is the run's wall time.
	Seconds float64
	// EpochSourceElements is how many elements the source yields in one
	// epoch (0: unknown, then no cache is recommended); EpochEstimated says
	// it is an estimate rather than a count.
	EpochSourceElements int64
	EpochEstimated      bool
}

// PrefetchBuffer is the buffer of the prefetches the recommendation
// inserts: enough to absorb the jitter between two stages that run at the
// same mean rate, small enough to hold a few images at most.
const PrefetchBuffer = 4

// Slack is how far below the LP's optimum the recommendation may stay to
// save a worker or a prefetch: a map gets ⌈θ/(1+Slack)⌉ workers, and a
// segment is cut only where its load exceeds (1+Slack)/X*. Without it a
// source that costs 0.3 % of the bounding op would earn a prefetch of its
// own.
const Slack = 0.05

// kind is how an op runs, as far as the model cares.
type kind int

const (
	seqOp      kind = iota // runs in the goroutine of its segment
	mapOp                  // a map: sequential at parallelism 1, its own workers above
	prefetchOp             // starts a new segment: its input runs in its own goroutine
)

// node is one op of the model: node 0 is the source, node k is Spec.Ops[k-1].
type node struct {
	name string
	kind kind
	// load is the op's busy seconds per output of the pipeline (1/R_k).
	load float64
}

// config is the knobs the model varies.
type config struct {
	par      []int  // per node: a map's parallelism (1 for every other op)
	cutAfter []bool // per node: a prefetch inserted after it
}

// bindKind says what kind of constraint bounds the throughput.
type bindKind int

const (
	bindSegment  bindKind = iota // one goroutine runs these ops one after another
	bindParallel                 // a map at its parallelism
	bindCores                    // the core budget
)

// binding is the constraint that bounds the throughput and the nodes in it.
type binding struct {
	kind  bindKind
	nodes []int
}

// predict returns the throughput (outputs per second) of configuration c
// on a budget of cores, and the constraint that bounds it. It is +Inf
// when no op measured any load.
func predict(nodes []node, c config, cores float64) (float64, binding) {
	best := math.Inf(1)
	var b binding
	consider := func(x float64, k bindKind, ns []int) {
		if x < best {
			best, b = x, binding{kind: k, nodes: append([]int(nil), ns...)}
		}
	}
	var seg []int
	segLoad, total := 0.0, 0.0
	flush := func() {
		if segLoad > 0 {
			consider(1/segLoad, bindSegment, seg)
		}
		seg, segLoad = seg[:0], 0
	}
	all := make([]int, len(nodes))
	for k, n := range nodes {
		all[k] = k
		total += n.load
		parallel := n.kind == mapOp && c.par[k] > 1
		if k > 0 && (n.kind == prefetchOp || parallel || c.cutAfter[k-1]) {
			flush()
		}
		if parallel {
			if n.load > 0 {
				consider(float64(c.par[k])/n.load, bindParallel, []int{k})
			}
			continue
		}
		seg = append(seg, k)
		segLoad += n.load
	}
	flush()
	if total > 0 {
		consider(cores/total, bindCores, all)
	}
	return best, b
}

// lpOptimum is the optimum of Plumber's LP: max X = min_k θ_k/load_k
// subject to Σ θ_k ≤ cores, θ_k ≤ 1 for ops that cannot run in parallel,
// θ_k ≤ MaxParallelism for maps. With one variable per op and every op
// needing θ_k = X·load_k, it is the smallest of the per-op bounds and
// cores/Σ load.
func lpOptimum(nodes []node, cores float64) float64 {
	x, total := math.Inf(1), 0.0
	for _, n := range nodes {
		total += n.load
		if n.load <= 0 {
			continue
		}
		if n.kind == mapOp {
			x = min(x, pipeline.MaxParallelism/n.load)
		} else {
			x = min(x, 1/n.load)
		}
	}
	if total > 0 {
		x = min(x, cores/total)
	}
	return x
}

// realise turns the LP's optimum x into a configuration: each map gets
// ⌈x·load/(1+Slack)⌉ workers, and prefetches cut every segment whose load
// exceeds (1+Slack)/x into contiguous groups that do not (greedily, which
// needs the fewest cuts), plus one at the end so the consumer overlaps the
// pipeline. Its throughput is within Slack of x.
func realise(nodes []node, x float64) config {
	c := config{par: make([]int, len(nodes)), cutAfter: make([]bool, len(nodes))}
	for k, n := range nodes {
		c.par[k] = 1
		if n.kind == mapOp && n.load > 0 && !math.IsInf(x, 1) {
			c.par[k] = int(min(max(math.Ceil(x*n.load/(1+Slack)-1e-9), 1), pipeline.MaxParallelism))
		}
	}
	if !math.IsInf(x, 1) && x > 0 {
		limit := (1 / x) * (1 + Slack)
		acc, prev := 0.0, -1
		for k, n := range nodes {
			parallel := n.kind == mapOp && c.par[k] > 1
			if k > 0 && (n.kind == prefetchOp || parallel) {
				acc, prev = 0, -1 // a new segment
			}
			if parallel {
				continue
			}
			if prev >= 0 && acc > 0 && acc+n.load > limit {
				c.cutAfter[prev] = true
				acc = 0
			}
			acc += n.load
			prev = k
		}
	}
	if last := len(nodes) - 1; last > 0 && nodes[last].kind != prefetchOp {
		c.cutAfter[last] = true
	}
	return c
}

// buildNodes derives the model's nodes from the spec and the run.
func buildNodes(spec *pipeline.Spec, run Run) ([]node, error) {
	if len(run.Ops) != len(spec.Ops)+1 {
		return nil, fmt.Errorf("diagnose: %d op statistics for a spec of %d ops (want the source and one per op)", len(run.Ops), len(spec.Ops))
	}
	out := run.Ops[len(run.Ops)-1].ElementsOut
	if out <= 0 {
		return nil, fmt.Errorf("diagnose: the pipeline produced no output in the run: nothing to analyse (run it longer, or check that its source is not empty)")
	}
	nodes := make([]node, len(run.Ops))
	for k, o := range run.Ops {
		n := node{name: o.Name, kind: seqOp, load: max(o.BusySeconds, 0) / float64(out)}
		if k > 0 {
			switch op := spec.Ops[k-1]; {
			case op.Map != nil:
				n.kind = mapOp
			case op.Prefetch != nil:
				n.kind = prefetchOp
			}
		}
		nodes[k] = n
	}
	return nodes, nil
}

// configured is the spec's own configuration.
func configured(spec *pipeline.Spec) config {
	c := config{par: make([]int, len(spec.Ops)+1), cutAfter: make([]bool, len(spec.Ops)+1)}
	c.par[0] = 1
	for i, op := range spec.Ops {
		c.par[i+1] = 1
		if op.Map != nil && op.Map.Parallelism > 1 {
			c.par[i+1] = op.Map.Parallelism
		}
	}
	return c
}
