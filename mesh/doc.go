// Package mesh is a feedmesh node: one process that is, at once, a member of
// the gossip mesh (hashicorp/memberlist), a possible Raft voter
// (internal/raftnode, running the pure state machine internal/fsm), a QUIC endpoint (transport) answering the control
// methods of the wire API (api), and a worker (internal/worker). Every node
// is identical; which nodes vote is decided by bootstrap_expect formation
// and then kept at its target size by the leader.
//
// The node is the I/O shell of the cluster: the deciding logic (who
// bootstraps, which voter to add or remove, and the leader's job upkeep:
// which dead workers to expire, which jobs to collect, which live workers
// to assign) lives in internal/plan as pure functions; the node feeds
// them gossip's view of the cluster and the clock and carries out what
// they decide through Raft. It answers control methods on the leader,
// forwarding them there from any other node, so a client may dial any
// node.
//
// As a worker the node runs tasks for the jobs it is assigned
// (internal/worker), which reach the node only through worker.Host: the
// split RPCs, job lookups, its replica of the cluster state and its
// autocache (the node's store of computed prefixes, shared with its peers
// over cache streams).
//
// A node starts with Start and a Config (DefaultConfig for deployments,
// FastConfig for in-process clusters). Off loopback it needs mutual TLS,
// with a node certificate that names it, and a gossip key, unless
// Config.Insecure (tls.go); Close drains its tasks and leaves
// the mesh, Kill stops it as a crash would. Recover makes survivors' data
// dirs the only voters after quorum is lost.
package mesh
