// Package compose tests that job features compose: every pair of values
// of sharding × delivery × offload × workers × share × coordinated ×
// autocache × take/skip × epochs × resume that Distribute accepts
// (jobspec.Conflicts) runs, in a pairwise covering array
// (internal/pairwise), on a 3-node in-process cluster with a worker
// killed in the middle, and delivers what its guarantee states
// (jobspec.Guarantee), element by element. See docs/jobs/composition.md.
package compose
