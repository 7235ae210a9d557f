// Package raftnode is the Raft shell around feedmesh's replicated state:
// the one package that runs hashicorp/raft (v1.8) and raft-boltdb/v2, and
// the only one that links them.
//
// A Node is one Raft server. It keeps raft's log and stable store in
// raft-boltdb and its snapshots in a file snapshot store, all in the
// node's data dir, and talks to its peers over a raft.StreamLayer that the
// mesh supplies: QUIC streams of the node's one UDP port in production
// (StreamLayer), TCP in this package's tests. A proposer's command is
// stamped with the proposer's clock and committed through Apply; the
// state machine itself is internal/fsm, which this package adapts to
// raft.FSM and reads for the mesh (Job, Jobs, Dataset, Get), copying
// under a lock because raft applies on its own goroutine.
//
// What the package owns is what a pure core must not: goroutines (a
// waiter per command whose context can end first), clocks (the command's
// At), sockets and files. Close tears every one of them down, connections
// included, and waits, so that a closed node leaves no goroutine behind.
// raft's hclog output is bridged to slog, its routine chatter at debug.
// Recover rewrites a stopped server's configuration after a permanent
// loss of quorum (raft's RecoverCluster), on the same stores Open uses.
//
// Which servers vote, and when a cluster forms, is decided by the pure
// planners of internal/plan, whose vocabulary (plan.Server,
// plan.ConfigServer, the roles) this package speaks.
package raftnode
