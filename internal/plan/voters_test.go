package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

var (
	now   = time.Unix(10_000, 0)
	grace = 30 * time.Second
)

func cfgOf(voters []string, nonvoters ...string) []ConfigServer {
	var c []ConfigServer
	for _, id := range voters {
		c = append(c, ConfigServer{ID: id, Addr: id + ":1", Suffrage: SuffrageVoter})
	}
	for _, id := range nonvoters {
		c = append(c, ConfigServer{ID: id, Addr: id + ":1", Suffrage: SuffrageNonvoter})
	}
	return c
}

func deadFor(id string, d time.Duration) Member {
	return Member{ID: id, Addr: id + ":1", DownSince: now.Add(-d)}
}

func add(id string) Change { return Change{Kind: AddVoter, Server: Server{ID: id, Addr: id + ":1"}} }
func remove(id string) Change {
	return Change{Kind: RemoveServer, Server: Server{ID: id, Addr: id + ":1"}}
}

func TestPlanVotersTable(t *testing.T) {
	long, short := 2*grace, grace/2
	cases := []struct {
		name    string
		target  int
		cfg     []ConfigServer
		members []Member
		want    []Change
	}{
		{"healthy", 3, cfgOf([]string{"a", "b", "c"}), alive("a", "b", "c", "d"), nil},
		{"replace dead voter, add first", 3, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "b", "d", "e"), deadFor("c", long)), []Change{add("d"), remove("c")}},
		{"within grace", 3, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "b", "d"), deadFor("c", short)), nil},
		{"dead without DownSince is kept", 3, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "b", "d"), Member{ID: "c", Addr: "c:1"}), nil},
		{"voter absent from gossip is kept", 3, cfgOf([]string{"a", "b", "c"}), alive("a", "b"), nil},
		{"no replacement: kept (removing it would not lower the quorum)", 3, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "b"), deadFor("c", long)), nil},
		{"no quorum: do nothing", 3, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "d", "e"), deadFor("b", long), deadFor("c", long)), nil},
		{"grow from one", 3, cfgOf([]string{"a"}), alive("a", "c", "b", "d"), []Change{add("b"), add("c")}},
		{"grow, too few members", 3, cfgOf([]string{"a"}), alive("a", "b"), []Change{add("b")}},
		{"nonvoter promoted first", 3, cfgOf([]string{"a", "b", "c"}, "z"),
			append(alive("a", "b", "d", "z"), deadFor("c", long)), []Change{add("z"), remove("c")}},
		{"one replacement per round", 5, cfgOf([]string{"a", "b", "c", "d", "e"}),
			append(alive("a", "b", "c", "f", "g"), deadFor("d", long), deadFor("e", long)),
			[]Change{add("f"), remove("d")}},
		{"dead voters removed where that lowers the quorum", 7, cfgOf([]string{"a", "b", "c", "d", "e", "f", "g"}),
			append(alive("a", "b", "c", "d"), deadFor("e", long), deadFor("f", long), deadFor("g", long)),
			[]Change{remove("e"), remove("f")}},
		{"leader with stale dead gossip stays", 3, cfgOf([]string{"a", "b", "c"}),
			append(alive("b", "c"), deadFor("a", long)), nil},
		{"target lowered: shed one live voter", 3, cfgOf([]string{"a", "b", "c", "d", "e"}),
			alive("a", "b", "c", "d", "e"), []Change{remove("e")}},
		{"dead nonvoter removed", 3, cfgOf([]string{"a", "b", "c"}, "x"),
			append(alive("a", "b", "c"), deadFor("x", long)), []Change{remove("x")}},
		{"leader not a voter", 3, cfgOf([]string{"b", "c", "d"}), alive("a", "b", "c", "d"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanVoters(tc.target, grace, now, "a", tc.cfg, tc.members)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestPlanVotersAuto covers the default, adaptive target: 3 voters, 5 once
// 5 members are live, never shedding a live voter because a member is
// briefly down.
func TestPlanVotersAuto(t *testing.T) {
	long, short := 2*grace, grace/2
	five := []string{"a", "b", "c", "d", "e"}
	cases := []struct {
		name    string
		target  int
		cfg     []ConfigServer
		members []Member
		want    []Change
	}{
		{"1 member", AutoVoters, cfgOf([]string{"a"}), alive("a"), nil},
		{"3 members grow to 3", AutoVoters, cfgOf([]string{"a"}), alive("a", "b", "c"), []Change{add("b"), add("c")}},
		{"3 members, 3 voters", AutoVoters, cfgOf([]string{"a", "b", "c"}), alive("a", "b", "c"), nil},
		{"4 members stay at 3 (odd)", AutoVoters, cfgOf([]string{"a", "b", "c"}), alive("a", "b", "c", "d"), nil},
		{"5 members grow to 5", AutoVoters, cfgOf([]string{"a", "b", "c"}), alive("a", "b", "c", "d", "e"),
			[]Change{add("d"), add("e")}},
		{"7 members grow to 5, not 7", AutoVoters, cfgOf([]string{"a", "b", "c"}), alive("a", "b", "c", "d", "e", "f", "g"),
			[]Change{add("d"), add("e")}},
		{"7 members, 5 voters", AutoVoters, cfgOf(five), alive("a", "b", "c", "d", "e", "f", "g"), nil},
		{"leader missing from gossip still counts", AutoVoters, cfgOf([]string{"a", "b", "c"}), alive("b", "c", "d", "e"),
			[]Change{add("d"), add("e")}},
		{"5 members, 2 briefly down: no growth", AutoVoters, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "b", "c"), deadFor("d", short), deadFor("e", short)), nil},
		{"nonvoter promoted first", AutoVoters, cfgOf([]string{"a", "b", "c"}, "z"), alive("a", "b", "c", "d", "z"),
			[]Change{add("z"), add("d")}},
		{"hysteresis: voter briefly down, no shedding", AutoVoters, cfgOf(five),
			append(alive("a", "b", "c", "d"), deadFor("e", short)), nil},
		{"hysteresis: two voters briefly down", AutoVoters, cfgOf(five),
			append(alive("a", "b", "c"), deadFor("d", short), deadFor("e", short)), nil},
		{"dead voter replaced at 5", AutoVoters, cfgOf(five),
			append(alive("a", "b", "c", "d", "f"), deadFor("e", long)), []Change{add("f"), remove("e")}},
		{"two dead voters, no spare: shrink to 3 by removal", AutoVoters, cfgOf(five),
			append(alive("a", "b", "c"), deadFor("d", long), deadFor("e", long)), []Change{remove("d"), remove("e")}},
		{"after the shrink: stays 3", AutoVoters, cfgOf([]string{"a", "b", "c"}),
			append(alive("a", "b", "c"), deadFor("d", long), deadFor("e", long)), nil},
		{"two dead voters, one spare", AutoVoters, cfgOf(five),
			append(alive("a", "b", "c", "f"), deadFor("d", long), deadFor("e", long)),
			[]Change{add("f"), remove("d")}},
		{"4 voters keep growing to 5", AutoVoters, cfgOf([]string{"a", "b", "c", "f"}), alive("a", "b", "c", "f", "g"),
			[]Change{add("g")}},
		{"4 voters, no spare: wait", AutoVoters, cfgOf([]string{"a", "b", "c", "f"}), alive("a", "b", "c", "f"), nil},
		{"no quorum: nothing", AutoVoters, cfgOf(five),
			append(alive("a", "b", "f", "g", "h"), deadFor("c", long), deadFor("d", long), deadFor("e", long)), nil},
		{"explicit 3 with 7 members", 3, cfgOf([]string{"a", "b", "c"}), alive("a", "b", "c", "d", "e", "f", "g"), nil},
		{"explicit 3 sheds a fifth voter", 3, cfgOf(five), alive("a", "b", "c", "d", "e"), []Change{remove("e")}},
		{"explicit 5 with 3 members", 5, cfgOf([]string{"a"}), alive("a", "b", "c"), []Change{add("b"), add("c")}},
		{"explicit 1 with 5 members", 1, cfgOf([]string{"a"}), alive("a", "b", "c", "d", "e"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanVoters(tc.target, grace, now, "a", tc.cfg, tc.members)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestVoterTarget(t *testing.T) {
	cases := []struct {
		name    string
		target  int
		voters  []string
		members []Member
		want    int
	}{
		{"auto, 1 member", AutoVoters, []string{"a"}, alive("a"), 3},
		{"auto, 4 members", AutoVoters, []string{"a", "b", "c"}, alive("a", "b", "c", "d"), 3},
		{"auto, 5 members", AutoVoters, []string{"a", "b", "c"}, alive("a", "b", "c", "d", "e"), 5},
		{"auto, 4 voters, 4 members", AutoVoters, []string{"a", "b", "c", "d"}, alive("a", "b", "c", "d"), 5},
		{"auto, 5 voters, 3 live", AutoVoters, []string{"a", "b", "c", "d", "e"}, alive("a", "b", "c"), 5},
		{"explicit 3, 7 members", 3, []string{"a", "b", "c"}, alive("a", "b", "c", "d", "e", "f", "g"), 3},
		{"explicit 7", 7, []string{"a"}, alive("a"), 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := VoterTarget(tc.target, "a", cfgOf(tc.voters), tc.members); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPlanVotersProperties applies random plans step by step and checks the
// invariants the mesh relies on.
func TestPlanVotersProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(2024, 11))
	for iter := range 5000 {
		target := []int{AutoVoters, 1, 3, 5}[r.IntN(4)]
		cfg, members, leader := randomCluster(r)
		plan := PlanVoters(target, grace, now, leader, cfg, members)

		// Deterministic, also when the inputs come in another order.
		c2, m2 := slices.Clone(cfg), slices.Clone(members)
		r.Shuffle(len(c2), func(i, j int) { c2[i], c2[j] = c2[j], c2[i] })
		r.Shuffle(len(m2), func(i, j int) { m2[i], m2[j] = m2[j], m2[i] })
		if again := PlanVoters(target, grace, now, leader, c2, m2); !reflect.DeepEqual(again, plan) {
			t.Fatalf("iter %d: plan depends on input order:\n%v\n%v", iter, plan, again)
		}
		eff := VoterTarget(target, leader, cfg, members)
		if target == AutoVoters && eff != 3 && eff != 5 {
			t.Fatalf("iter %d: auto target %d, want 3 or 5", iter, eff)
		}
		checkPlan(t, iter, eff, leader, cfg, members, plan)
	}
}

func randomCluster(r *rand.Rand) (cfg []ConfigServer, members []Member, leader string) {
	n := 1 + r.IntN(7)
	ids := r.Perm(12)
	for i := range n {
		id := fmt.Sprintf("s%02d", ids[i])
		suff := SuffrageVoter
		if i > 0 && r.IntN(5) == 0 {
			suff = []string{SuffrageNonvoter, SuffrageStaging}[r.IntN(2)]
		}
		cfg = append(cfg, ConfigServer{ID: id, Addr: id + ":1", Suffrage: suff})
	}
	leader = cfg[0].ID
	for _, id := range ids[:n+r.IntN(12-n)] {
		name := fmt.Sprintf("s%02d", id)
		switch r.IntN(6) {
		case 0: // absent from gossip
		case 1, 2:
			members = append(members, Member{ID: name, Addr: name + ":1", DownSince: now.Add(-time.Duration(r.IntN(60)) * time.Second)})
		default:
			members = append(members, Member{ID: name, Addr: name + ":1", Alive: true})
		}
	}
	return cfg, members, leader
}

func checkPlan(t *testing.T, iter, target int, leader string, cfg []ConfigServer, members []Member, plan []Change) {
	t.Helper()
	mem := indexMembers(members)
	live := func(id string) bool { return id == leader || mem[id].Alive }
	voters := map[string]bool{}
	inCfg := map[string]bool{}
	for _, s := range cfg {
		inCfg[s.ID] = true
		if s.Suffrage == SuffrageVoter {
			voters[s.ID] = true
		}
	}
	count := func() (n, l int) {
		for id := range voters {
			n++
			if live(id) {
				l++
			}
		}
		return n, l
	}
	n0, l0 := count()
	fail := func(format string, args ...any) {
		t.Fatalf("iter %d (target %d, leader %s, cfg %v, members %v, plan %v): %s",
			iter, target, leader, cfg, members, plan, fmt.Sprintf(format, args...))
	}
	if l0 < quorum(n0) && len(plan) > 0 {
		fail("planned changes without a live quorum")
	}
	seen := map[Change]bool{}
	removing := false
	for _, c := range plan {
		if seen[c] {
			fail("duplicate change %v", c)
		}
		seen[c] = true
		switch c.Kind {
		case AddVoter:
			if removing {
				fail("add after a remove")
			}
			if voters[c.Server.ID] || !mem[c.Server.ID].Alive {
				fail("bad add %v", c)
			}
			voters[c.Server.ID] = true
			inCfg[c.Server.ID] = true
		case RemoveServer:
			removing = true
			if c.Server.ID == leader {
				fail("removes the leader")
			}
			if !inCfg[c.Server.ID] {
				fail("removes a server not in the configuration")
			}
			if voters[c.Server.ID] && live(c.Server.ID) {
				if n, _ := count(); n <= target {
					fail("removes live voter %s at or below target", c.Server.ID)
				}
			}
			delete(voters, c.Server.ID)
			delete(inCfg, c.Server.ID)
		}
		n, l := count()
		if l < quorum(n) {
			fail("live voters %d below quorum of %d after %v", l, n, c)
		}
		if l > max(target, l0) {
			fail("%d live voters exceed target", l)
		}
		if n > max(target, n0)+1 {
			fail("%d voters exceed target+1", n)
		}
	}
	if n, _ := count(); n0 <= target && n > target {
		fail("ends with %d voters > target", n)
	}
}

// StaleServers: a live member that advertises a Raft role and is absent
// from the configuration is stale (a server removed while it was down and
// restarted with its old configuration); one in the configuration, one
// that advertises no role (beyond the voters, or never joined) and a dead
// one are not.
func TestStaleServers(t *testing.T) {
	cfg := cfgOf([]string{"a", "b", "c"}, "d")
	live := func(id, role string) Member { return Member{ID: id, Addr: id + ":1", Alive: true, Role: role} }
	members := []Member{
		live("a", RoleLeader), live("b", RoleVoter), live("c", RoleVoter), live("d", RoleNonvoter),
		live("e", RoleVoter),    // removed while down, restarted: stale
		live("f", RoleNonvoter), // so too
		live("g", RoleNone),     // outside the configuration and knows it
		live("h", ""),           // never joined a cluster
		{ID: "i", Addr: "i:1", Role: RoleVoter, DownSince: now}, // dead
	}
	got := StaleServers(cfg, members)
	want := []Server{{ID: "e", Addr: "e:1"}, {ID: "f", Addr: "f:1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StaleServers = %+v, want %+v", got, want)
	}
	if got := StaleServers(cfg, members[:4]); len(got) != 0 {
		t.Errorf("no stale server: %+v", got)
	}
}
