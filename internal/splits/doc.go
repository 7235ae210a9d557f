// Package splits decides which worker reads which split of a dataset: the
// three sharding policies of a job (OFF, DYNAMIC, STATIC), how many splits
// one DYNAMIC lease hands out, and the lease bookkeeping of a DYNAMIC job
// over its epochs, including what a dead worker's leases become.
//
// It is pure in the etcd-raft sense: no goroutines, clocks, sockets or
// randomness. The state machine (internal/fsm) embeds a DynamicState in
// each DYNAMIC job of its replicated state and drives it from Raft
// commands, so every replica makes the same decisions from the same log;
// the mesh's worker tasks call
// StaticAssignment to decide what to read. How many splits a worker asks
// for in one lease is the worker's decision (mesh/leasepolicy.go: as many
// as its pipeline reads in WorkerConfig.LeaseDuration); a lease never hands
// out more than are left in the epoch.
//
// Files: policy.go (Policy), static.go (STATIC assignment), dynamic.go
// (DYNAMIC leases, epochs, at-most-once expiry), exactly.go (exactly-once:
// produced splits, settling, departures), receipts.go (what consumers
// received), orphans.go (a dead worker's splits: orphans and fences),
// census.go (at-most-once with an exact loss count), handback.go (splits a
// draining worker returns), resume.go (a job resumed from its consumers'
// checkpoints: Delivered, skipped splits and epochs, exclusions),
// progress.go (summaries for status pages), validate.go (the invariants of
// a DynamicState decoded from a snapshot).
package splits
