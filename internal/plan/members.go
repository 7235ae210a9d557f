package plan

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Member is gossip's view of one node, the input of BootstrapPlan and
// PlanVoters.
type Member struct {
	// ID is the node name (its Raft server id); Addr its QUIC address.
	ID, Addr string
	// Alive is gossip's liveness verdict.
	Alive bool
	// DownSince is when gossip declared the node dead (zero when alive, or
	// when unknown).
	DownSince time.Time
	// Role is the Raft role the member advertises in its gossip metadata
	// (leader, voter, nonvoter, none). "" and "none" mean it holds no Raft
	// cluster state; anything else means a cluster already exists, and
	// BootstrapPlan then never bootstraps.
	Role string
}

// inCluster reports whether m advertises membership of a Raft cluster.
func (m Member) inCluster() bool { return m.Role != "" && m.Role != RoleNone }

// indexMembers maps ID to member, choosing among duplicates by a fixed order
// (alive first, then by Addr) so the result does not depend on input order.
func indexMembers(members []Member) map[string]Member {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int {
		if a.ID != b.ID {
			return strings.Compare(a.ID, b.ID)
		}
		if a.Alive != b.Alive {
			if a.Alive {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(a.Addr, b.Addr), a.DownSince.Compare(b.DownSince))
	})
	out := make(map[string]Member, len(ms))
	for _, m := range ms {
		if m.ID == "" || m.Addr == "" {
			continue
		}
		if _, ok := out[m.ID]; !ok {
			out[m.ID] = m
		}
	}
	return out
}
