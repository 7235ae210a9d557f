package raftnode

import (
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/hashicorp/raft"
)

// Status is a snapshot of a node's Raft view, for status pages and gossip
// metadata.
type Status struct {
	// ID is this node's id; Leader and LeaderAddr the leader's ("" when
	// unknown).
	ID, Leader, LeaderAddr string
	// State is Leader, Follower, Candidate or Shutdown.
	State string
	// Term is the current term; the indexes are this node's view.
	Term, CommitIndex, AppliedIndex, LastLogIndex uint64
	// Voters are the voters of the latest configuration, sorted by ID.
	Voters []plan.Server
	// Role is this node's role from the latest configuration: leader,
	// voter, nonvoter (also staging) or none.
	Role string
}

// Status returns this node's view of Raft.
func (n *Node) Status() Status {
	st := Status{
		ID:           n.cfg.ID,
		State:        n.raft.State().String(),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastLogIndex: n.raft.LastIndex(),
		Role:         plan.RoleNone,
	}
	st.Leader, st.LeaderAddr = n.Leader()
	cfg, err := n.Configuration()
	if err != nil {
		return st
	}
	for _, s := range cfg {
		if s.Suffrage == plan.SuffrageVoter {
			st.Voters = append(st.Voters, plan.Server{ID: s.ID, Addr: s.Addr})
		}
		if s.ID == n.cfg.ID {
			st.Role = plan.RoleNonvoter
			if s.Suffrage == plan.SuffrageVoter {
				st.Role = plan.RoleVoter
			}
		}
	}
	if st.Role == plan.RoleVoter && st.State == raft.Leader.String() {
		st.Role = plan.RoleLeader
	}
	return st
}

// IsLeader reports whether this node is the leader right now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's id and address, "" when unknown.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderCh reports leadership changes of this node: true on becoming leader,
// false on losing it. It holds one value and a newer one replaces an unread
// older one, so a slow reader sees the latest state, not every flap. It is
// never closed; stop reading when the node is closed.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// Term is the current Raft term as this node knows it.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }
