package raftstate

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// TestHandBackSplits: a draining worker's unstarted splits go to the next
// worker that asks, before any new split, and nothing is counted lost; a
// hand-back is refused when no other worker would take the splits.
func TestHandBackSplits(t *testing.T) {
	for _, exact := range []bool{false, true} {
		delivery := ""
		if exact {
			delivery = DeliveryExactlyOnce
		}
		t.Run("exact="+fmt.Sprint(exact), func(t *testing.T) {
			s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: delivery})
			applyOK(t, s, NewAssignTask("j1", "w1"))
			l1 := applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 100, 1, 4)).(splits.Lease) // 0..3

			// w1 alone in the job: nobody would read them.
			applyErr(t, s, NewHandBackSplits("j1", 0, "w1", 0, l1.Splits[2:]), splits.ErrHandBackRefused)

			applyOK(t, s, NewAssignTask("j1", "w2"))
			// Not w1's, or not leased: refused, nothing changes.
			applyErr(t, s, NewHandBackSplits("j1", 0, "w2", 0, l1.Splits[2:]), splits.ErrNotLeased)
			applyErr(t, s, NewHandBackSplits("j1", 0, "w1", 0, []int64{9}), splits.ErrNotLeased)
			applyErr(t, s, NewHandBackSplits("j1", 99, "w1", 0, l1.Splits[2:]), ErrNotAssigned) // another job ID

			applyOK(t, s, NewHandBackSplits("j1", 0, "w1", 0, l1.Splits[2:])) // 2, 3
			l2 := applyOK(t, s, NewLeaseSplitsAs("j1", "w2", 200, 1, 3)).(splits.Lease)
			if !reflect.DeepEqual(l2.Splits, []int64{2, 3}) {
				t.Fatalf("w2's lease after the hand-back: %v, want [2 3]", l2.Splits)
			}
			if exact && !reflect.DeepEqual(l2.Exclude, []ranges.Set{nil, nil}) {
				t.Fatalf("exclusions %v of splits nothing was delivered of", l2.Exclude)
			}
			v, _ := s.Job("j1")
			p := v.Progress
			if p.Total.Lost != 0 || p.Total.HandedBack != 2 || p.Outstanding != 4 || p.Waiting != 0 || p.Total.Leased != 4 {
				t.Fatalf("progress after hand-back and re-lease: %+v", p)
			}
			// The job state survives a snapshot with splits handed back.
			applyOK(t, s, NewHandBackSplits("j1", 0, "w2", 0, []int64{3}))
			b, err := s.MarshalSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalSnapshot(b)
			if err != nil || !reflect.DeepEqual(got, s) {
				t.Fatalf("snapshot with a split handed back: %v", err)
			}
		})
	}
}

// TestDrainAndRejoin: a worker records its drain only once it holds
// nothing; the leader plans a rejoin for a newer process of a worker that
// drained or was expired, never for the same process back from a pause;
// a rejoined worker is assigned afresh; AssignTask still refuses an
// expired worker.
func TestDrainAndRejoin(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))
	l := applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 100, 1, 2)).(splits.Lease)
	applyErr(t, s, NewDrainTask("j1", 0, "w1", 100), ErrNotAssigned) // holds 2 splits
	applyOK(t, s, NewFinishSplits("j1", "w1", 0, l.Splits))
	applyOK(t, s, NewDrainTask("j1", 0, "w1", 100))
	applyOK(t, s, NewLeaseSplitsAs("j1", "w2", 300, 1, 2))
	applyOK(t, s, NewExpireWorker("w2")) // w2 dies holding 2 splits: lost

	members := func(inc1, inc2 uint64) []JobMember {
		return []JobMember{
			{ID: "w1", Addr: "a1", Status: MemberAlive, Worker: true, Incarnation: inc1},
			{ID: "w2", Addr: "a2", Status: MemberAlive, Worker: true, Incarnation: inc2},
		}
	}
	v, _ := s.Job("j1")
	if steps := PlanJobWorkers(members(100, 300), v); len(steps) != 0 {
		t.Fatalf("the same processes (back from a pause) rejoin: %+v", steps)
	}
	steps := PlanJobWorkers(members(101, 301), v)
	if len(steps) != 2 || steps[0].Worker != "w1" || steps[1].Worker != "w2" || steps[0].Command.Type != TypeDrainTask {
		t.Fatalf("newer processes: steps %+v, want a rejoin of w1 and w2", steps)
	}
	applyErr(t, s, NewAssignTask("j1", "w2"), ErrNotAssigned)
	for _, st := range steps {
		applyOK(t, s, at(st.Command, 5000))
	}
	v, _ = s.Job("j1")
	for _, w := range []string{"w1", "w2"} {
		if st := v.Workers[w]; st.Expired || st.Drained || st.Since != 5000 {
			t.Fatalf("%s after rejoining: %+v", w, st)
		}
	}
	if v.Progress.Total.Lost != 2 {
		t.Fatalf("lost %d, want w2's 2", v.Progress.Total.Lost)
	}
	applyErr(t, s, NewRejoinTask("j1", "w1"), ErrNotAssigned) // serving: nothing to rejoin
	if steps := PlanJobWorkers(members(102, 302), v); len(steps) != 0 {
		t.Fatalf("serving workers rejoin: %+v", steps)
	}

	// Jobs whose workers are fixed take nobody back.
	s2 := newJobState(t, &JobOptions{Sharding: splits.Off, Epochs: 1})
	applyOK(t, s2, NewAssignTask("j1", "w1"))
	applyOK(t, s2, NewExpireWorker("w1"))
	v2, _ := s2.Job("j1")
	for _, st := range PlanJobWorkers(members(101, 301), v2) {
		if st.Worker == "w1" {
			t.Fatalf("an OFF job's expired worker rejoins: %+v", st)
		}
	}
	applyErr(t, s2, NewRejoinTask("j1", "w1"), ErrNotAssigned)
}
