package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func alive(ids ...string) []Member {
	var ms []Member
	for _, id := range ids {
		ms = append(ms, Member{ID: id, Addr: id + ":1", Alive: true})
	}
	return ms
}

func servers(ids ...string) []Server {
	var ss []Server
	for _, id := range ids {
		ss = append(ss, Server{ID: id, Addr: id + ":1"})
	}
	return ss
}

func TestBootstrapPlanTable(t *testing.T) {
	dead := Member{ID: "c", Addr: "c:1", DownSince: time.Unix(1, 0)}
	cases := []struct {
		name    string
		self    string
		expect  int
		members []Member
		voters  []Server
		boot    bool
	}{
		{"three of three, first", "a", 3, alive("c", "a", "b"), servers("a", "b", "c"), true},
		{"three of three, last", "c", 3, alive("b", "c", "a"), servers("a", "b", "c"), true},
		{"fourth waits", "d", 3, alive("d", "c", "b", "a"), servers("a", "b", "c"), false},
		{"lowest ids win", "b", 2, alive("d", "c", "b", "a"), servers("a", "b"), true},
		{"too few alive", "a", 3, append(alive("a", "b"), dead), nil, false},
		{"too few", "a", 3, alive("a", "b"), nil, false},
		{"expect zero", "a", 0, alive("a"), nil, false},
		{"single node", "a", 1, alive("a"), servers("a"), true},
		{"self unknown", "z", 2, alive("a", "b"), nil, false},
		{"self dead", "c", 2, append(alive("a", "b"), dead), nil, false},
		{"cluster exists", "a", 3, append(alive("a", "b"), Member{ID: "c", Addr: "c:1", Alive: true, Role: RoleVoter}), nil, false},
		{"role none is no cluster", "a", 3, append(alive("a", "b"), Member{ID: "c", Addr: "c:1", Alive: true, Role: RoleNone}), servers("a", "b", "c"), true},
		{"dead member in cluster is ignored", "a", 2, append(alive("a", "b"), Member{ID: "c", Addr: "c:1", Role: RoleLeader}), servers("a", "b"), true},
		{"ambiguous id", "a", 2, append(alive("a", "b"), Member{ID: "b", Addr: "other:1", Alive: true}), nil, false},
		{"duplicate same addr", "a", 2, append(alive("a", "b"), alive("b")...), servers("a", "b"), true},
		{"empty id or addr ignored", "a", 3, append(alive("a", "b"), Member{ID: "c", Alive: true}, Member{Addr: "x:1", Alive: true}), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			voters, boot := BootstrapPlan(tc.self, tc.expect, tc.members)
			if boot != tc.boot || !reflect.DeepEqual(voters, tc.voters) {
				t.Fatalf("got %v, %v; want %v, %v", voters, boot, tc.voters, tc.boot)
			}
		})
	}
}

// TestBootstrapPlanProperties: for random gossip views shared by all nodes,
// exactly `expect` nodes bootstrap (or none), all with the identical sorted
// list of the lowest alive IDs, whatever the order of the members.
func TestBootstrapPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	for iter := range 2000 {
		n := 1 + r.IntN(8)
		var members []Member
		var aliveIDs []string
		for range n {
			m := Member{ID: fmt.Sprintf("n%02d", r.IntN(50)), Alive: r.IntN(4) > 0}
			m.Addr = m.ID + ":9"
			if slices.ContainsFunc(members, func(x Member) bool { return x.ID == m.ID }) {
				continue
			}
			if m.Alive {
				aliveIDs = append(aliveIDs, m.ID)
			} else {
				m.DownSince = time.Unix(int64(r.IntN(100)), 0)
			}
			members = append(members, m)
		}
		slices.Sort(aliveIDs)
		expect := 1 + r.IntN(5)
		var lists [][]Server
		for _, self := range aliveIDs {
			voters, boot := BootstrapPlan(self, expect, members)
			shuffled := slices.Clone(members)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			v2, b2 := BootstrapPlan(self, expect, shuffled)
			if b2 != boot || !reflect.DeepEqual(v2, voters) {
				t.Fatalf("iter %d: order changed the plan", iter)
			}
			if len(aliveIDs) < expect {
				if voters != nil || boot {
					t.Fatalf("iter %d: plan with %d alive < expect %d", iter, len(aliveIDs), expect)
				}
				continue
			}
			if len(voters) != expect {
				t.Fatalf("iter %d: %d voters, expect %d", iter, len(voters), expect)
			}
			for i, v := range voters {
				if v.ID != aliveIDs[i] {
					t.Fatalf("iter %d: voters %v are not the lowest alive %v", iter, voters, aliveIDs)
				}
			}
			inList := slices.ContainsFunc(voters, func(s Server) bool { return s.ID == self })
			if boot != inList {
				t.Fatalf("iter %d: bootstrap=%v but self in list=%v", iter, boot, inList)
			}
			if boot {
				lists = append(lists, voters)
			}
		}
		if len(aliveIDs) >= expect && len(lists) != expect {
			t.Fatalf("iter %d: %d nodes bootstrap, want %d", iter, len(lists), expect)
		}
		for _, l := range lists {
			if !reflect.DeepEqual(l, lists[0]) {
				t.Fatalf("iter %d: bootstrappers disagree: %v vs %v", iter, l, lists[0])
			}
		}
	}
}
