// Package diagnose turns a pipeline's per-op statistics into a diagnosis
// and a recommendation, after Plumber (Kuchnik et al., MLSys'22): per op,
// elements/s, CPU-seconds and bytes per element and its share of the path
// that bounds throughput; the op that bounds throughput and why; the
// throughput predicted as configured; Plumber's LP allocation of cores
// across ops within a core budget, realised as map parallelism and
// prefetches, with the throughput predicted after it; and the largest
// cacheable prefix that fits a memory budget. Rewrite and RewriteYAML apply
// the recommendation to a spec.
//
// It is pure: no clocks, goroutines or files. `feedmesh diagnose` (the
// shell, in cmd/feedmesh) runs the pipeline for a bounded time, hands the
// statistics here and prints the Report. It lives under pipeline/, beside
// fn and formats, because it speaks only the pipeline's own types (Spec,
// OpStats) and nothing of the mesh: a worker applying the allocation live
// (`parallelism: auto`) and a node's status page can import it without
// importing cmd/ or the node, and the engine itself does not depend on it.
//
// # The model
//
// Operational analysis, as in the paper. Over a run that produced C
// outputs (elements of the last op: batches when the spec batches), op k
// was busy B_k seconds (its own work, summed over a parallel map's
// workers), so it costs load_k = B_k / C seconds per output: 1/load_k is
// its rate R_k per core in output units (Plumber's R_i = r_i/V_i).
// Busy time is wall time inside the op, the stand-in for CPU time: an op
// that sleeps or waits on I/O counts as busy, so on a machine with few
// cores, ops that sleep emulate CPU work that more cores would run in
// parallel, and --cores sets the emulated budget.
//
// Three kinds of constraint bound the throughput X (outputs per second):
//
//   - a segment, a chain of sequential ops that one goroutine drives (the
//     ops between two prefetches or parallel maps), runs them one after
//     another: X ≤ 1 / Σ load over the segment;
//   - a map at parallelism p: X ≤ p / load;
//   - the core budget N: X ≤ N / Σ load over all ops.
//
// The prediction as configured is the smallest of these. Plumber's LP,
// max X = min_k θ_k R_k subject to Σ θ_k ≤ N, θ_k ≤ 1 for sequential ops,
// has one variable per op and its optimum in closed form: every op must
// reach the same X, so θ_k = X·load_k, and X* = min(min over sequential
// ops of R_k, N / Σ_k load_k). The recommendation realises it: each map
// gets parallelism ⌈X*·load_k⌉ and prefetches cut the segments whose
// summed load exceeds 1/X* (a greedy cut, which is optimal for contiguous
// groups), so the recommended configuration's prediction is X* again, to
// within Slack (5 %): a worker or a prefetch that would gain less is left
// out.
//
// # Caching
//
// A prefix of the pipeline can be cached if every op in it is
// deterministic and finite: it stops at the first shuffle, repeat, or map
// or filter whose function is random or unknown (Deterministic). The
// recommendation is the longest such prefix whose output for one epoch,
// (source elements per epoch) × (elements out / source elements out) ×
// (bytes per element), fits the memory budget; none when none fits or the
// epoch's size is unknown.
package diagnose
