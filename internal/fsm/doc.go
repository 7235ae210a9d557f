// Package fsm is feedmesh's replicated state machine: the few facts the
// mesh must agree on (a key/value table, datasets, jobs with their
// consumers, workers and split leases) and the commands that change them.
// It is pure: no goroutines, clocks or sockets, and no Raft. The Raft
// shell (internal/raftnode) feeds it committed log entries in order; tests
// and the leader's planner (internal/plan) drive it directly.
//
// A Command is the envelope of every log entry: a command type, the
// schema version of its body, the proposer's clock (At) and the body, all
// CBOR. State.ApplyIndex dispatches on the type through one table of
// every type number, and the type's handler decodes the body for its
// version, checks it against the state, and either changes the state or
// returns an error and leaves it as it was. Each command has its own file
// (cmd_<name>.go) with its body, its constructors (which document the
// command's result), its checks and its handler.
//
// Determinism is the contract. A handler reads only the command and the
// state: every id and timestamp it needs was chosen by the proposer and
// travels in the body or in At, and a job's ID is the log index of the
// command that created it. Replaying a log on any replica, at any time,
// with any version of this package that knows its commands, yields the
// same state and the same results, and a snapshot of that state encodes
// to the same bytes. So the log format is a promise: type numbers are
// never reused, a body's CBOR keys never change meaning, a new field
// comes with a new version, and a change in what a command does (even a
// bug fix) is a new version, never a change to an old one.
// testdata/compat holds a log recorded from an earlier build that the
// tests replay byte for byte.
//
// A job's options are api/jobspec's: a CreateJob (since version 6)
// carries them as jobspec encodes them, normalized, and the job holds
// them as they came (Job.Options, a jobspec.Job, which decoding
// normalizes and checks again). Versions 1 to 5 carried the legacy
// JobOptions: their checks run as they always did, then the options are
// converted once (JobOptions.stored); format 2 snapshots' likewise.
//
// The State holds the KV table, the datasets and the jobs. A job carries
// what its options call for: DYNAMIC split leases (internal/splits, both
// at-most-once and exactly-once, with orphans, fences and a census of
// what a dead worker lost), a STATIC worker list, a coordinated job's
// round schedule, a share group's leases shared by the jobs of one
// dataset, an autoscaling job's policy state (internal/plan/autoscale,
// stepped on its consumers' heartbeats), a consumer's offload state.
// The snapshot format (versioned, validated on restore as input from disk
// or the network) is the State's encoding.
package fsm
