// Package splits decides which worker reads which split of a dataset: the
// three sharding policies of a job (OFF, DYNAMIC, STATIC), how many splits
// one DYNAMIC lease hands out, and the lease bookkeeping of a DYNAMIC job
// over its epochs, including what a dead worker's leases become.
//
// It is pure in the etcd-raft sense: no goroutines, clocks, sockets or
// randomness. raftstate embeds a DynamicState in each DYNAMIC job of its
// replicated state and drives it from Raft commands, so every replica
// makes the same decisions from the same log; the mesh's worker tasks call
// LeaseSize and StaticAssignment to decide what to ask for and what to read.
//
// Files: policy.go (Policy), static.go (STATIC assignment), leasesize.go
// (lease sizing), dynamic.go (DYNAMIC leases, epochs, at-most-once expiry).
package splits
