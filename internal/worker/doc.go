// Package worker is what a feedmesh worker does, wherever it runs: on a
// node, or in a consumer's own process as the client's local worker.
//
// A node's Worker runs one task per job it works for, started by the first
// consumer stream that asks for the job. A task's producer makes the
// job's batches in one of three ways, chosen from the job's options: plain
// (its own pipeline over its splits), shared (one production per dataset,
// read by every sharing job on the worker through a share.Shared window)
// or rounds (coordinated reads: bucketed batches grouped into round
// windows, one per round, served on per-round requests). Every producer
// queues through one path, offer, which is also where a task notices that
// its job is gone because its consumers left. A graceful shutdown drains
// the tasks: they hand back what they have not started and serve what
// they queued.
//
// DYNAMIC productions lease their splits through one lease loop (Leaser),
// which a client's local worker runs as well: it feeds a pipeline with
// splits leased from the job, several per lease and asked for ahead of need
// (leasePolicy, pure: it takes the time as an argument), and reports back
// what the pipeline read (at-most-once: finished) or emitted (exactly-once:
// produced). It hands splits back when its worker drains or is dismissed,
// follows a cut and a census set while it runs, and waits for a dead
// worker's splits between exactly-once phases. The semantics of leasing
// therefore live in one place; where the two workers differ (a local worker
// runs the whole pipeline, so a cut does not apply to it, and a share gate
// holds it to a fraction of its consumer's batches) the LeaseConfig says
// so.
//
// The cluster is reached through two small interfaces: Control (lease,
// finish, produce, hand back), which the node implements through Raft and
// the client through its control calls, and Host, the rest of what a node's
// worker needs of its node (job lookups, the node's replica of the cluster
// state, the end of a task, its autocache).
//
// Words, one meaning each: a production ends; a split is finished once
// read; a lease loop is done once the leader hands out no more.
package worker
