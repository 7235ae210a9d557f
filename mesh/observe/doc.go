// Package observe is a node's HTTP face for operators: Prometheus metrics
// (/metrics), a JSON snapshot of the cluster as the node sees it
// (/status.json) and a status page drawn from it (/), with no external
// assets, so that it works offline.
//
// Nothing here keeps state between requests: every scrape reads the node's
// counters (mesh.Node's Status, Members, Tasks, OpStats, LocalJobs, …) as
// they are. Metrics describe this node and its tasks, and the jobs as its
// own replica of the Raft state has them (the same on every node, so
// aggregate those with max, not sum). The status snapshot also asks the
// leader for the jobs and each job's workers for their per-op statistics,
// each within Options.RequestTimeout; what does not answer is listed as
// such, never waited for longer. The page polls the snapshot and keeps the
// throughput history itself (in the browser, bounded by its own sample
// count).
package observe
