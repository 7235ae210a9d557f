package plan

import (
	"cmp"
	"slices"
	"strings"
)

// BootstrapPlan is Consul's bootstrap_expect. Once this node sees `expect`
// alive members (itself among them), the `expect` members with the lowest
// IDs each bootstrap with the identical voter list, sorted by ID; the others
// wait to be added by the leader. It returns the voter list as soon as one
// can be formed, and bootstrap=true only for the members on it.
//
// It returns no plan when expect < 1, when fewer than expect usable members
// are alive, when self is not among them, when two alive members claim one
// ID with different addresses (the views are ambiguous: wait for gossip to
// settle), or when an alive member advertises a Raft role (a cluster exists:
// join it, never form a second one). Members with an empty ID or Addr are
// ignored.
//
// Safety rests on every node seeing the same lowest `expect` members; that is
// why formation waits for gossip to converge (the mesh joins every known
// address) and refuses when a cluster already exists.
func BootstrapPlan(selfID string, expect int, members []Member) (voters []Server, bootstrap bool) {
	if expect < 1 {
		return nil, false
	}
	alive := make(map[string]string) // id -> addr
	for _, m := range members {
		if !m.Alive || m.ID == "" || m.Addr == "" {
			continue
		}
		if m.inCluster() {
			return nil, false
		}
		if a, ok := alive[m.ID]; ok && a != m.Addr {
			return nil, false
		}
		alive[m.ID] = m.Addr
	}
	if _, ok := alive[selfID]; !ok || len(alive) < expect {
		return nil, false
	}
	for id, addr := range alive {
		voters = append(voters, Server{ID: id, Addr: addr})
	}
	sortServers(voters)
	voters = voters[:expect]
	return voters, slices.ContainsFunc(voters, func(s Server) bool { return s.ID == selfID })
}

func sortServers(s []Server) {
	slices.SortFunc(s, func(a, b Server) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.Addr, b.Addr))
	})
}
