package plan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

func TestAllocateWorkers(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	got := allocateWorkers(map[string]int{"a": 2, "b": 3}, nodes, map[string][]string{"a": {"n5", "n6"}})
	if !slices.Equal(got["a"], []string{"n5", "n6"}) || len(got["b"]) != 3 || slices.Contains(got["b"], "n5") {
		t.Errorf("enough nodes: %v (a keeps n5, n6)", got)
	}
	// More wanted than there is: max-min fair shares, one job per node.
	got = allocateWorkers(map[string]int{"a": 1, "b": 8, "c": 8}, nodes, nil)
	if len(got["a"]) != 1 || len(got["b"])+len(got["c"]) != 5 || absInt(len(got["b"])-len(got["c"])) > 1 {
		t.Errorf("contended: %v", got)
	}
	// The examples of docs/jobs/autoscaling.md: on 6 nodes, wants 2 and 5 get 2 and 4; 4 and
	// 5 get 3 and 3.
	for _, c := range []struct{ a, b, wantA, wantB int }{{2, 5, 2, 4}, {4, 5, 3, 3}} {
		got = allocateWorkers(map[string]int{"a": c.a, "b": c.b}, nodes, nil)
		if len(got["a"]) != c.wantA || len(got["b"]) != c.wantB {
			t.Errorf("wants %d and %d: %v, want %d and %d nodes", c.a, c.b, got, c.wantA, c.wantB)
		}
	}
	// More jobs than nodes: one node each, shared evenly.
	got = allocateWorkers(map[string]int{"a": 3, "b": 3, "c": 3}, nodes[:2], nil)
	load := map[string]int{}
	for _, ns := range got {
		if len(ns) != 1 {
			t.Fatalf("more jobs than nodes: %v", got)
		}
		load[ns[0]]++
	}
	if load["n1"]+load["n2"] != 3 || absInt(load["n1"]-load["n2"]) > 1 {
		t.Errorf("more jobs than nodes: %v", got)
	}
}

func absInt(x int) int { return int(math.Abs(float64(x))) }

// Property: over random wants, nodes and current assignments, no job gets
// a node that is not live or more nodes than it wants; every job that
// wants workers gets one; while the wants fit, no node serves two jobs and
// each job gets what it wants; when they do not fit (and jobs <= nodes),
// no node idles and the shares are max-min fair.
func TestAllocateWorkersProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for iter := 0; iter < 5000; iter++ {
		var nodes []string
		for i := range r.IntN(9) {
			nodes = append(nodes, string(rune('a'+i)))
		}
		want := map[string]int{}
		current := map[string][]string{}
		for j := range r.IntN(6) {
			name := "job" + string(rune('0'+j))
			want[name] = r.IntN(6)
			for _, n := range nodes {
				if r.IntN(4) == 0 {
					current[name] = append(current[name], n)
				}
			}
			if r.IntN(3) == 0 {
				current[name] = append(current[name], "gone")
			}
		}
		got := allocateWorkers(want, nodes, current)
		total, active := 0, 0
		for _, w := range want {
			total += w
			if w > 0 {
				active++
			}
		}
		perNode := map[string]int{}
		for j, ns := range got {
			if len(ns) > want[j] {
				t.Fatalf("job %s wants %d, got %v", j, want[j], ns)
			}
			if want[j] > 0 && len(nodes) > 0 && len(ns) == 0 {
				t.Fatalf("job %s wants %d and got nothing: %v over %v", j, want[j], got, nodes)
			}
			for _, n := range ns {
				if !slices.Contains(nodes, n) {
					t.Fatalf("job %s got %s, not a live node", j, n)
				}
				perNode[n]++
			}
		}
		if active <= len(nodes) {
			for n, k := range perNode {
				if k > 1 {
					t.Fatalf("node %s serves %d jobs though %d jobs fit on %d nodes: %v", n, k, active, len(nodes), got)
				}
			}
		}
		if total <= len(nodes) {
			for j, w := range want {
				if len(got[j]) != w {
					t.Fatalf("wants fit (%d on %d nodes) but %s got %d of %d", total, len(nodes), j, len(got[j]), w)
				}
			}
		} else if active <= len(nodes) {
			if len(perNode) != len(nodes) {
				t.Fatalf("wants exceed the nodes but %d of %d are used: %v", len(perNode), len(nodes), got)
			}
			for a, wa := range want {
				for b, wb := range want {
					if wa > 0 && wb > 0 && len(got[a]) < wa && len(got[b]) > len(got[a])+1 {
						t.Fatalf("unfair: %s wants %d has %d, %s has %d: %v", a, wa, len(got[a]), b, len(got[b]), got)
					}
				}
			}
		}
	}
}

// Autoscaling jobs spread over the nodes: two jobs that want 2 workers
// each on 4 nodes get disjoint pairs; a third then takes the least loaded
// node; a job that does not autoscale still gets every node.
func TestAutoscaleJobsSpread(t *testing.T) {
	s := fsm.NewState()
	applyOK(t, s, fsm.NewRegisterDataset(testDataset))
	for _, name := range []string{"a", "b"} {
		applyOK(t, s, at(fsm.LegacyCreateJob(name, "fp1", fsm.JobOptions{Sharding: splits.Dynamic, Autoscale: true, ConsumerTTL: 1e12, GCAfter: 1e12}, nil), 1000))
		s.Jobs[name].Scale.Workers = 2
	}
	applyOK(t, s, at(fsm.LegacyCreateJob("plain", "fp1", fsm.JobOptions{Sharding: splits.Dynamic, ConsumerTTL: 1e12, GCAfter: 1e12}, nil), 1000))
	members := []JobMember{member("n1", MemberAlive), member("n2", MemberAlive), member("n3", MemberAlive), member("n4", MemberAlive)}
	steps := PlanJobs(time.Unix(0, 2000), members, s.JobList())
	got := map[string][]string{}
	for _, st := range steps {
		if st.Job != "" && st.Worker != "" {
			got[st.Job] = append(got[st.Job], st.Worker)
		}
		_, _ = s.Apply(st.Command)
	}
	if len(got["a"]) != 2 || len(got["b"]) != 2 || len(got["plain"]) != 4 {
		t.Fatalf("assignments %v", got)
	}
	for _, w := range got["a"] {
		if slices.Contains(got["b"], w) {
			t.Fatalf("autoscaling jobs share %s: %v", w, got)
		}
	}
	// At creation (PlanJobWorkersAmong), an autoscaling job takes a node
	// no other autoscaling job uses: with a on n1, n2 and b on n3, n4
	// released from b (b expired there), c gets n3.
	applyOK(t, s, at(fsm.NewExpireWorker(got["b"][0]), 2500))
	applyOK(t, s, at(fsm.LegacyCreateJob("c", "fp1", fsm.JobOptions{Sharding: splits.Dynamic, Autoscale: true, ConsumerTTL: 1e12, GCAfter: 1e12}, nil), 3000))
	view, _ := s.Job("c")
	steps = PlanJobWorkersAmong(members, view, s.JobList())
	if len(steps) != 1 || steps[0].Worker != got["b"][0] {
		t.Fatalf("a new autoscaling job: %+v, want one step to %s, the node no autoscaling job serves", steps, got["b"][0])
	}
}
