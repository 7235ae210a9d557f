// Package testcluster runs real feedmesh nodes (memberlist, Raft with
// raft-boltdb on disk, QUIC on loopback) inside one test process, with
// faults injected by wrapping each node's UDP socket and gossip transport:
// Kill, Stop, Restart, Partition and Heal. Tests wait for conditions with
// WaitFor, never by sleeping.
package testcluster
