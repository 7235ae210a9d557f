// Package testhooks holds hooks that this module's tests set to make a rare
// interleaving happen on purpose. Product code never sets them, and being
// internal they are no part of the module's API; where one is consulted it
// costs one atomic load.
package testhooks

import "sync/atomic"

// BeforeFSMApply, when set, is called by raftstate on the FSM goroutine
// before a node's state machine applies a command entry, with that node's
// Raft address (unique within a process, unlike node names, which every
// in-process cluster reuses) and the entry's index. Blocking in it holds
// back that node's state machine only, as a slow disk or a starved core
// would: its log, commit index and elections go on.
var BeforeFSMApply atomic.Pointer[func(addr string, index uint64)]

// LeaderCatchingUp, when set, is called by the mesh when the leader at addr
// (its QUIC address) does not find job in its state and, before answering
// that the job does not exist, waits until its state machine has applied
// everything committed (mesh's jobGet). A test learns from it that a lookup
// is waiting there.
var LeaderCatchingUp atomic.Pointer[func(addr, job string)]
