package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// The allocation as the leader applies it, over random jobs, wants and
// meshes, round after round (each round: plan, apply, and the released
// workers drain): while there are no more autoscaling jobs than nodes, a
// node never serves two of them (counting a worker still draining a
// release), no job has more workers than it wants, and the jobs together
// never have more workers than the mesh has nodes. Once the wants stand,
// every job has its fair share.
func TestAllocationProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 16))
	for iter := 0; iter < 300; iter++ {
		s := fsm.NewState()
		applyOK(t, s, fsm.NewRegisterDataset(testDataset))
		nJobs, nNodes := 1+rng.IntN(4), 1+rng.IntN(7)
		var members []JobMember
		for i := 0; i < nNodes; i++ {
			members = append(members, member(fmt.Sprintf("n%d", i), MemberAlive))
		}
		want := map[string]int{}
		for i := 0; i < nJobs; i++ {
			name := fmt.Sprintf("j%d", i)
			applyOK(t, s, at(fsm.LegacyCreateJob(name, "fp1", fsm.JobOptions{Sharding: splits.Dynamic, Autoscale: true, ConsumerTTL: 1e12, GCAfter: 1e12}, nil), 1000))
			applyOK(t, s, at(fsm.NewAttachConsumer(name, "c"), 1000))
		}
		for round := 0; round < 12; round++ {
			if round%4 == 0 { // the policies change their minds
				for i := 0; i < nJobs; i++ {
					name := fmt.Sprintf("j%d", i)
					want[name] = 1 + rng.IntN(6)
					s.Jobs[name].Scale.Workers = want[name]
				}
			}
			now := time.Unix(0, int64(2000+round))
			for _, st := range PlanJobs(now, members, s.JobList()) {
				_, _ = s.Apply(at(st.Command, now.UnixNano()))
			}
			check := func(when string) {
				serves := map[string]int{}
				total := 0
				for name, j := range s.Jobs {
					active := 0
					for w, st := range j.Workers {
						if st.Expired || (st.Dismissed && st.Drained) {
							continue
						}
						serves[w]++
						if !st.Dismissed {
							active++
						}
					}
					if active > want[name] {
						t.Fatalf("iter %d round %d %s: job %s has %d workers, wants %d", iter, round, when, name, active, want[name])
					}
					total += active
				}
				if nJobs <= nNodes {
					for w, k := range serves {
						if k > 1 {
							t.Fatalf("iter %d round %d %s: node %s serves %d autoscaling jobs on %d nodes", iter, round, when, w, k, nNodes)
						}
					}
					if total > nNodes {
						t.Fatalf("iter %d round %d %s: %d workers on %d nodes", iter, round, when, total, nNodes)
					}
				}
			}
			check("after the plan")
			// The released workers drain (these jobs lease nothing).
			for name, j := range s.Jobs {
				for w, st := range j.Workers {
					if st.Dismissing() {
						applyOK(t, s, at(fsm.NewDrainTask(name, j.ID, w, 0), now.UnixNano()))
					}
				}
			}
			check("after the drains")
		}
		// The wants have stood for 4 rounds: every job has its share.
		if nJobs <= nNodes {
			jobs := []string{}
			for name := range want {
				jobs = append(jobs, name)
			}
			share := waterFill(sortedStrings(jobs), want, nNodes)
			for name, j := range s.Jobs {
				if got := j.ActiveWorkers(); got != share[name] {
					t.Fatalf("iter %d: job %s has %d workers, its fair share is %d (wants %v on %d nodes)", iter, name, got, share[name], want, nNodes)
				}
			}
		}
	}
}

func sortedStrings(xs []string) []string {
	out := append([]string(nil), xs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
