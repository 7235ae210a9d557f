// Package raftstate is feedmesh's replicated state: the few facts the mesh
// must agree on (a key/value table, datasets, jobs with their consumers,
// workers and split leases) kept in a small Raft group.
//
// It has two halves, kept apart on purpose:
//
//   - A pure core with no goroutines, clocks or sockets: the versioned CBOR
//     Command envelope (command.go), its dispatch table (table.go) and the
//     KV commands (kv.go), the dataset and job commands (jobs.go: types,
//     bounds, read access; jobcmds.go: bodies, constructors, handlers, with
//     DYNAMIC leases kept by the splits package; taskend.go: EndTask,
//     a task's end or failure, and a job's State), the State they apply to
//     (state.go) and its versioned snapshot format (snapshot.go), share
//     groups (sharegroup.go) and coordinated-read rounds (rounds.go), and the
//     planners, which take gossip's members (and, where time matters, the
//     clock) as arguments and return what to do: cluster formation à la
//     Consul's bootstrap_expect (formation.go), the leader's voter
//     maintenance (voters.go: the voter target, 3 or 5 by default, and
//     the changes toward it) and the leader's job upkeep, PlanJobs
//     (planjobs.go: which dead workers to expire, which jobs to collect,
//     which live workers to assign, as commands to apply in order). These
//     are tested by tables, properties and fuzzing. fsm.go adapts State to
//     raft.FSM.
//   - A thin shell, Node (node.go), that runs hashicorp/raft v1.8 with
//     raft-boltdb/v2 as log and stable store and a file snapshot store, all in
//     the node's data dir, over a raft.StreamLayer that the mesh supplies
//     (QUIC streams in production, TCP in this package's tests). conns.go
//     tracks the layer's connections so Close leaves no goroutine behind;
//     logger.go bridges raft's hclog to slog. recover.go rewrites a stopped
//     server's configuration after a permanent loss of quorum (raft's
//     RecoverCluster), on the same stores Open uses.
//
// Every id and timestamp a command needs is chosen by the proposer before
// Apply and travels inside the command, so replaying the log on any node, at
// any time, yields the same state.
package raftstate
