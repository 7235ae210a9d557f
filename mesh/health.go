package mesh

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api"
)

// ReadyMaxLag is how many committed Raft entries a node holding a replica
// may have left to apply and still count as caught up: a follower under a
// steady stream of commands always trails by a few, one restarted from
// its data dir trails by its whole log until it has replayed it.
const ReadyMaxLag = 128

// HealthCheck is one condition of Readiness.
type HealthCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Readiness tells whether the node is ready for work (Kubernetes'
// readinessProbe, /readyz): it has joined the cluster, knows the Raft
// leader, has applied what is committed (if it holds a replica) and is not
// draining or leaving. Each condition is listed with why.
type Readiness struct {
	Ready  bool          `json:"ready"`
	Checks []HealthCheck `json:"checks"`
}

// Readiness checks the node's readiness now.
func (n *Node) Readiness() Readiness {
	var r Readiness
	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, HealthCheck{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	// Joined: another member is alive, or the node runs alone by design
	// (no --join, no --bootstrap-expect, never part of a cluster).
	others := 0
	for _, m := range n.members.snapshot() {
		if m.Name != n.name && (m.Status == api.StatusAlive || m.Status == api.StatusSuspect) {
			others++
		}
	}
	standalone := len(n.cfg.Join) == 0 && n.cfg.BootstrapExpect == 0 && !n.knewOthers
	switch {
	case others > 0:
		add("joined", true, "%d other members alive", others)
	case standalone:
		add("joined", true, "single node (no --join, no --bootstrap-expect)")
	default:
		add("joined", false, "no other member seen yet (joining %v)", n.cfg.Join)
	}
	// Leader known: from Raft if this node is in the configuration, else
	// from gossip.
	if addr := n.leaderAddr(); addr != "" {
		add("leader", true, "leader at %s", addr)
	} else {
		add("leader", false, "no Raft leader known")
	}
	// Caught up: a replica has applied what is committed.
	if n.inRaftConfig() {
		rs := n.raft.Status()
		lag := uint64(0)
		if rs.CommitIndex > rs.AppliedIndex {
			lag = rs.CommitIndex - rs.AppliedIndex
		}
		add("caught_up", lag <= ReadyMaxLag, "applied %d of %d committed entries (%s)", rs.AppliedIndex, rs.CommitIndex, rs.Role)
	} else {
		add("caught_up", true, "holds no replica of the state (not a voter)")
	}
	// Accepting work: not draining or leaving (SIGTERM, Close).
	if n.leaving.Load() {
		add("accepting", false, "draining, then leaving the cluster")
	} else {
		add("accepting", true, "serving")
	}
	r.Ready = true
	for _, c := range r.Checks {
		r.Ready = r.Ready && c.OK
	}
	return r
}
