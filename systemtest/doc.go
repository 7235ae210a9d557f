// Package systemtest is the home of feedmesh's system tests: end-to-end
// tests of the whole system (client, nodes, gossip, Raft, QUIC) on
// in-process clusters of real nodes (testcluster: memberlist, Raft with
// raft-boltdb on disk, QUIC on loopback) or on node processes, by topic:
//
//   - delivery: how a job delivers (sharding modes, exactly-once,
//     lockstep consumers, resume from checkpoints, streams, compression,
//     S3 datasets)
//   - failover: faults in the middle of a job (kills, leader death,
//     drains, rolling restarts, pauses, expiry, loss counting)
//   - offload: remote, local and auto offload, cut points, a local
//     consumer's process killed
//   - coordinated: coordinated reads (rounds) and their faults
//   - autoscale: autoscaling and op autotuning
//   - sharing: ephemeral sharing and autocache
//   - compose: every pair of job features (a pairwise covering array of
//     the combinations jobspec.Conflicts accepts) under a worker's kill
//   - dataaccess: what specs may read (issue 37): a hostile tenant's
//     files outside the data roots, links, `..`, /proc, tokenizer files,
//     redirects to internal services, an endpoint of the spec's choosing
//     for the nodes' object-store credentials, each refused with one
//     generic answer; reads under the roots, allowed hosts and named
//     stores work
//   - process: real node processes (the feedmesh binary, built by the
//     tests) SIGKILLed, SIGTERMed and restarted; a dev-mode node whose
//     keys and data dir lie in its working directory (its default data
//     root) reads none of them; the chaos test (build tag chaos, run by
//     hand)
//
// The packages hold tests only; what they share (dialing, reading a job
// to its end, checking what arrived, the specs) is in
// internal/testutil/jobtest. A package's own tests stay with it: `go test
// ./client` is the client's unit tests. `go test ./systemtest/...` runs
// them all (about 5 minutes on 2 cores); `-short` skips the slowest, as
// before the move.
package systemtest
