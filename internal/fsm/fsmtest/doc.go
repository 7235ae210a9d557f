// Package fsmtest runs the replicated state machine from datadriven
// scripts (github.com/cockroachdb/datadriven), in the manner of
// etcd-io/raft's rafttest: each script line is one of the protocol's
// commands, in the words the protocol uses (create-job, attach, lease,
// finish, worker-dies, receipts …), applied through fsm's public API as
// the Raft shell would apply a committed entry, and answered with its
// result and the state it leaves. Expected outputs sit in the script
// under "----"; go test -rewrite writes them anew, to be read before
// they are committed.
//
// An Env is one replica's state and the proposers' clock; Handle runs
// one script command. Each command's handler is in the file named after
// it, handler_<command>.go; print.go renders the state. The planner's
// scripts (internal/plan) build their replicated state with this same
// Env.
package fsmtest
