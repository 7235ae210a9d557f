// Package worker is what a feedmesh worker does for a DYNAMIC job,
// wherever it runs: on a node, or in a consumer's own process as the
// client's local worker. Its lease loop (Leaser) feeds a pipeline with
// splits leased from the job, several per lease and asked for ahead of
// need (leasePolicy, pure), and reports back what the pipeline read
// (at-most-once: finished) or emitted (exactly-once: produced). It hands
// splits back when its worker drains or is released, follows a cut and a
// census set while it runs, and waits for a dead worker's splits between
// exactly-once phases.
//
// The cluster is reached through Control, a small interface: the node
// implements it through Raft (forwarding to the leader), the client
// through its control calls. The semantics of leasing therefore live in
// one place; where the two workers differ (a local worker runs the whole
// pipeline, so a cut does not apply to it, and a share gate holds it to a
// fraction of its consumer's batches) the Config says so.
package worker
