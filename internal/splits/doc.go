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
package splits
