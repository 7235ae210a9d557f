// Package localcluster runs real feedmesh nodes (memberlist, Raft with
// raft-boltdb on disk, QUIC on loopback) inside one process: the in-process
// cluster behind `feedmesh demo` and the benchmarks (cmd/feedmesh-bench),
// and, through testcluster, the tests. It starts, kills, stops, restarts
// and adds nodes; callers wait for conditions with Wait or Poll, never by
// sleeping.
//
// It imports no testing code and injects no faults, so the product binary
// can carry it: testcluster adds what tests need (the fault network behind
// Partition, Isolate and Heal, Start with t.Cleanup, WaitFor that fails the
// test, node logs to t.Log) through WithConfig and WithStarted.
package localcluster
