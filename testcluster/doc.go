// Package testcluster runs real feedmesh nodes (memberlist, Raft with
// raft-boltdb on disk, QUIC on loopback) inside one test process, with
// faults injected by wrapping each node's UDP socket and gossip transport:
// Kill, Stop, Restart, Partition, Isolate and Heal. Tests wait for
// conditions with WaitFor, never by sleeping.
//
// The cluster itself is mesh/localcluster, which links no testing code and
// injects no faults, so that `feedmesh demo` can run it; this package adds
// the fault network and the test glue: Start (a temporary data dir, Close
// on t.Cleanup, the test failed if the cluster does not form), WaitFor and
// node logs through t.Log.
package testcluster
