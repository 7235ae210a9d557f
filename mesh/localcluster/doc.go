// Package localcluster runs real feedmesh nodes (memberlist, Raft with
// raft-boltdb on disk, QUIC on loopback) inside one process: the in-process
// cluster behind `feedmesh demo`, the benchmarks (cmd/feedmesh-bench) and,
// through testcluster, the tests. Faults are injected by wrapping each
// node's UDP socket and gossip transport: Kill, Stop, Restart, Partition,
// Isolate and Heal. Callers wait for conditions with Wait or Poll, never by
// sleeping.
//
// It imports no testing code, so the product binary can carry it;
// testcluster adds what tests need (Start with t.Cleanup, WaitFor that fails
// the test, node logs to t.Log).
//
// Files:
//
//	cluster.go  options, New, the nodes' lifecycle (Kill, Stop, Restart, RestartNoJoin, Add), Leader, Wait, Poll, Close
//	faults.go   the socket and gossip-transport wrappers that drop traffic across a partition
package localcluster
