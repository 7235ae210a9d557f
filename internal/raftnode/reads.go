package raftnode

import (
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/hashicorp/raft"
)

// Get reads key from the local FSM (possibly stale on a follower; use
// Barrier on the leader first for a linearizable read). The value is a copy.
func (n *Node) Get(key string) (value []byte, ok bool) { return n.machine.get(key) }

// Job returns a deep copy of the named job from the local FSM, with its
// DYNAMIC progress (possibly stale on a follower, like Get).
func (n *Node) Job(name string) (fsm.JobView, bool) { return n.machine.job(name) }

// JobCut is the offload boundary of the job of that name and id (id 0:
// any) in the local FSM: 0 when it has none, or is gone. A job cut while
// it runs (OffloadBody.Cut) shows here on every node as soon as the
// command is applied, before any lease says so.
func (n *Node) JobCut(name string, id uint64) int { return n.machine.jobCut(name, id) }

// IdleLease is fsm.State.IdleLease on the local FSM: the empty lease a
// node kept off a job's splits gets, when LeaseSplits would change
// nothing (possibly stale, like Get; see fsm.State.IdleLease).
func (n *Node) IdleLease(job string, jobID uint64, worker string, incarnation uint64) (splits.Lease, bool) {
	return n.machine.idleLease(job, jobID, worker, incarnation)
}

// JobTenant is the tenant of the job of that name in the local FSM ("":
// the default tenant's, fsm.TenantOf), without copying the job; false if
// there is no such job.
func (n *Node) JobTenant(name string) (string, bool) { return n.machine.jobTenant(name) }

// TenantUsage is what tenant holds in the local FSM, and the totals
// (fsm.State.TenantUsage).
func (n *Node) TenantUsage(tenant string) fsm.Usage { return n.machine.tenantUsage(tenant) }

// HasConsumer reports whether consumer is attached to job in the local
// FSM.
func (n *Node) HasConsumer(job, consumer string) bool { return n.machine.hasConsumer(job, consumer) }

// Token is token id's record in the local FSM (fsm.State.TokenRecord).
func (n *Node) Token(id string) (fsm.Token, bool) { return n.machine.token(id) }

// UnreadDatasets lists the datasets no job reads in the local FSM, their
// specs left out (fsm.State.UnreadDatasets).
func (n *Node) UnreadDatasets() []fsm.Dataset { return n.machine.unreadDatasets() }

// Jobs returns deep copies of every job in the local FSM, sorted by name,
// all read at one consistent point.
func (n *Node) Jobs() []fsm.JobView { return n.machine.jobs() }

// Dataset returns a copy of the registered dataset with that fingerprint
// from the local FSM.
func (n *Node) Dataset(fingerprint string) (fsm.Dataset, bool) { return n.machine.dataset(fingerprint) }

// AppliedCommands counts the commands this node's state machine has
// applied since it started, by type name (CommandType.String; "other" for
// a type beyond the known ones or an entry that did not decode). Every
// node applies every committed command, so any node's counts give the
// cluster's command rate (benchmarks).
func (n *Node) AppliedCommands() map[string]uint64 { return n.machine.appliedCommands() }

// Raft is an escape hatch for tests.
func (n *Node) Raft() *raft.Raft { return n.raft }
