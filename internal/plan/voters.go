package plan

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// ChangeKind is the kind of a configuration change.
type ChangeKind int

// Change kinds, applied with Node.AddVoter and Node.RemoveServer.
const (
	// AddVoter adds a server as voter, or promotes a nonvoter.
	AddVoter ChangeKind = iota + 1
	// RemoveServer removes a server from the configuration.
	RemoveServer
)

// String names the kind.
func (k ChangeKind) String() string {
	switch k {
	case AddVoter:
		return "AddVoter"
	case RemoveServer:
		return "RemoveServer"
	}
	return "ChangeKind(?)"
}

// Change is one configuration change planned by PlanVoters.
type Change struct {
	Kind   ChangeKind
	Server Server
}

// quorum is the majority of n voters.
func quorum(n int) int { return n/2 + 1 }

// AutoVoters, as PlanVoters' target, lets the planner pick the voter count
// from the cluster's size (VoterTarget): the default.
const AutoVoters = 0

// Auto voter counts: small clusters run 3 voters (tolerating 1 failure);
// from autoGrowAt live members on they run 5 (tolerating 2), as Consul and
// etcd recommend. Both odd: an even count adds a voter to wait for without
// tolerating one more failure.
const (
	autoSmall  = 3
	autoLarge  = 5
	autoGrowAt = 5
)

// VoterTarget is the voter count PlanVoters works toward. An explicit
// target (>= 1) is returned as is. AutoVoters gives 5 once at least 5
// members are live (the leader counts as live) and 3 below that, with
// hysteresis: while the configuration has more than 3 voters the target
// stays 5, so a member that is briefly suspect or dead never makes the
// planner shed a live voter. The voter count only falls back to 3 through
// the removal of voters dead past grace (PlanVoters rule 4), and grows to 5
// again as members come back.
func VoterTarget(target int, leaderID string, cfg []ConfigServer, members []Member) int {
	if target != AutoVoters {
		return target
	}
	voters := map[string]bool{}
	for _, s := range cfg {
		if s.Suffrage == SuffrageVoter {
			voters[s.ID] = true
		}
	}
	live := 0
	mem := indexMembers(members)
	for id, m := range mem {
		if m.Alive || id == leaderID {
			live++
		}
	}
	if _, ok := mem[leaderID]; !ok && leaderID != "" {
		live++
	}
	if live >= autoGrowAt || len(voters) > autoSmall {
		return autoLarge
	}
	return autoSmall
}

// PlanVoters plans, on the leader, the changes that bring the voter set
// toward target, or, when target is AutoVoters, toward VoterTarget's
// choice (3 voters, 5 once 5 members are live). The mesh calls it every interval and applies the changes in
// order, stopping at the first error (the next round re-plans from the new
// configuration). The rules, in order:
//
//  1. Liveness. A voter is live if it is the leader or gossip says it is
//     alive. It is dead past grace if gossip has it dead with DownSince at
//     least grace before now. A voter absent from members, or dead without a
//     DownSince, counts as not live but is never removed: the mesh must keep
//     dead members (with DownSince) in the list it passes for them to be
//     replaced.
//  2. No quorum, no plan. If live voters are fewer than a quorum of the
//     current voters, nothing can commit, and shrinking the configuration
//     to get one back would risk two majorities: return nothing. Likewise if
//     leaderID is not a voter of cfg.
//  3. Add before remove. First AddVoter for live members that are not voters
//     (nonvoters of cfg first, then by ID): to fill empty slots up to target,
//     plus at most one replacement for a voter dead past grace. One
//     replacement per round bounds the transient voter count at target+1,
//     and the live-voter count never exceeds target.
//  4. Then RemoveServer for voters dead past grace (by ID): those a
//     replacement was added for (voters above target), and more only where
//     removing them lowers the quorum (5 voters with 2 dead become 3 with
//     none). A dead voter whose removal would not lower the quorum (one of
//  3. is kept: removing it would not raise fault tolerance, and kept, it
//     is a voter again the moment it comes back, with no window in which a
//     second failure stops a cluster whose majority is up. Each removal is
//     checked anyway to keep live voters at or above quorum.
//  5. If voters still exceed target (target was lowered), remove one live
//     non-leader voter, highest ID first, if quorum still holds.
//  6. Finally, remove nonvoters and staging servers dead past grace.
//
// The leader is never removed. Members with an empty ID or Addr are ignored.
// The output depends only on the inputs, not on their order.
func PlanVoters(target int, grace time.Duration, now time.Time, leaderID string, cfg []ConfigServer, members []Member) []Change {
	target = VoterTarget(target, leaderID, cfg, members)
	if target < 1 {
		return nil
	}
	mem := indexMembers(members)
	isLive := func(id string) bool { return id == leaderID || mem[id].Alive }
	deadPast := func(id string) bool {
		m, ok := mem[id]
		return ok && id != leaderID && !m.Alive && !m.DownSince.IsZero() && now.Sub(m.DownSince) >= grace
	}

	servers := slices.Clone(cfg)
	slices.SortFunc(servers, func(a, b ConfigServer) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.Addr, b.Addr))
	})
	servers = slices.CompactFunc(servers, func(a, b ConfigServer) bool { return a.ID == b.ID })
	var voters, others []ConfigServer
	for _, s := range servers {
		if s.Suffrage == SuffrageVoter {
			voters = append(voters, s)
		} else {
			others = append(others, s)
		}
	}
	if !slices.ContainsFunc(voters, func(s ConfigServer) bool { return s.ID == leaderID }) {
		return nil
	}
	n, live := len(voters), 0
	var dead []ConfigServer
	for _, v := range voters {
		if isLive(v.ID) {
			live++
		} else if deadPast(v.ID) {
			dead = append(dead, v)
		}
	}
	if live < quorum(n) {
		return nil
	}

	var plan []Change
	// 3. Adds.
	cands := candidates(voters, others, mem)
	adds := min(len(cands), max(0, target-n)+min(len(dead), 1), max(0, target-live))
	for _, c := range cands[:adds] {
		plan = append(plan, Change{Kind: AddVoter, Server: c})
	}
	n, live = n+adds, live+adds
	// 4. Dead voters.
	for _, d := range dead[:deadRemovals(n, target, len(dead))] {
		if live < quorum(n-1) {
			break // cannot happen (d is not live); kept as the safety net
		}
		plan = append(plan, Change{Kind: RemoveServer, Server: Server{ID: d.ID, Addr: d.Addr}})
		n--
	}
	// 5. Excess live voters.
	if n > target {
		for i := len(voters) - 1; i >= 0; i-- {
			v := voters[i]
			if v.ID == leaderID || !isLive(v.ID) || live-1 < quorum(n-1) {
				continue
			}
			plan = append(plan, Change{Kind: RemoveServer, Server: Server{ID: v.ID, Addr: v.Addr}})
			break
		}
	}
	// 6. Dead non-voters.
	for _, o := range others {
		if deadPast(o.ID) {
			plan = append(plan, Change{Kind: RemoveServer, Server: Server{ID: o.ID, Addr: o.Addr}})
		}
	}
	return plan
}

// deadRemovals is how many of dead voters dead past grace rule 4 removes
// from n voters: those above target (a replacement was added), and beyond
// that only as many as lower the quorum (the fewest that reach the lowest
// quorum). A dead voter kept where removing it would not lower the quorum
// costs no fault tolerance, and when it comes back it is a voter at once;
// removed, it would wait to be added again, and a second failure in that
// window (a 3-voter cluster left with 2, one of them dead) stops the
// cluster although 2 of the 3 nodes are up.
func deadRemovals(n, target, dead int) int {
	k := min(dead, max(0, n-target))
	best := quorum(n - dead)
	for quorum(n-k) > best {
		k++
	}
	return k
}

// candidates are live members that are not voters, nonvoters of the
// configuration first (they already have the log), then by ID.
func candidates(voters, others []ConfigServer, mem map[string]Member) []Server {
	isVoter := make(map[string]bool, len(voters))
	for _, v := range voters {
		isVoter[v.ID] = true
	}
	inCfg := make(map[string]bool, len(others))
	for _, o := range others {
		inCfg[o.ID] = true
	}
	var out []Server
	for id, m := range mem {
		if m.Alive && !isVoter[id] {
			out = append(out, Server{ID: id, Addr: m.Addr})
		}
	}
	slices.SortFunc(out, func(a, b Server) int {
		if inCfg[a.ID] != inCfg[b.ID] {
			if inCfg[a.ID] {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// StaleServers are the live members that advertise a Raft role (they hold
// a configuration that names them) but are absent from the leader's
// configuration cfg, sorted by ID. Raft never tells a server that was
// removed while it was down: restarted, it holds the configuration it
// had, in which it is still a voter, so it runs elections that the
// members of the real configuration refuse, learns no leader, and, being
// in a configuration by its own account, does not ask gossip for one
// either. Nothing changes for it until the leader adds it back, which
// PlanVoters does only when the voter target has room. The leader adds a
// stale server as a nonvoter: the configuration and heartbeats reach it,
// and it is the first candidate when a voter slot opens.
//
// A live voter that rule 5 removes advertises its old role until its
// next gossip update: the caller waits a while before acting on a
// server found stale, and adding such a one as a nonvoter is harmless.
func StaleServers(cfg []ConfigServer, members []Member) []Server {
	inCfg := make(map[string]bool, len(cfg))
	for _, s := range cfg {
		inCfg[s.ID] = true
	}
	var out []Server
	for id, m := range indexMembers(members) {
		if m.Alive && m.inCluster() && !inCfg[id] {
			out = append(out, Server{ID: id, Addr: m.Addr})
		}
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.ID, b.ID) })
	return out
}
