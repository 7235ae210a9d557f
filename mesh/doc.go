// Package mesh is a feedmesh node: one process that is, at once, a member of
// the gossip mesh (hashicorp/memberlist), a possible Raft voter (raftstate),
// and a QUIC endpoint (transport) serving control requests and, in later
// layers, batches. Every node is identical; which nodes vote is decided by
// bootstrap_expect formation and then kept at its target size by the leader.
//
// The deciding logic (who bootstraps, which voter to add or remove, and the
// leader's job upkeep: which dead workers to expire, which jobs to collect,
// which live workers to assign, raftstate.PlanJobs) lives in raftstate as
// pure functions; this package is the I/O shell that feeds them gossip's
// view of the cluster and the clock and carries out what they decide (the
// job loop in jobs.go, the formation and voter loops in loops.go).
//
// As a worker a node runs one task per job (worker.go) and, for jobs with
// Share, one shared production per dataset that every sharing job's task
// reads through a share.Shared window (sharing.go; counters in
// sharestats.go). For coordinated jobs a task
// groups its bucketed batches into round windows and answers per-round
// requests (coordinated.go); the round schedule itself is in raftstate.
// The wire API the node serves (method names, requests, responses) is in
// the subpackage api, which the client imports instead of this package.
package mesh
