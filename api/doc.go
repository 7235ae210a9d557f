// Package api is feedmesh's wire API: the control methods a node answers
// and the messages they carry, and the per-stream messages of coordinated
// reads. Both sides import it: the node (mesh) serves these methods and the
// client (client, and through it the Python package) calls them.
//
// It depends on nothing heavier than transport's error type and the
// tensor and bucketing types the messages embed: no Raft store, no
// gossip. `go list -deps ./client` must show no hashicorp/raft,
// raft-boltdb, bbolt, memberlist or the replicated state
// (internal/raftnode, internal/fsm), and this package is why it can.
//
// A job's options are jobspec's (api/jobspec: Options, their one
// normalization, the job's bounds): JobOptions is an alias of
// jobspec.Options, so that the messages read as the wire does.
//
// Every message keeps its CBOR keys (keyasint) stable: a field is added
// with a new key, never renumbered.
package api
