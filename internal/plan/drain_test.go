package plan

import (
	"testing"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// TestDrainAndRejoin: a worker records its drain only once it holds
// nothing; the leader plans a rejoin for a newer process of a worker that
// drained or was expired, never for the same process back from a pause;
// a rejoined worker is assigned afresh; AssignTask still refuses an
// expired worker.
func TestDrainAndRejoin(t *testing.T) {
	s := newJobState(t, &fsm.JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, fsm.NewAssignTask("j1", "w1"))
	applyOK(t, s, fsm.NewAssignTask("j1", "w2"))
	l := applyOK(t, s, fsm.NewLeaseSplitsAs("j1", "w1", 100, 1, 2)).(splits.Lease)
	applyErr(t, s, fsm.NewDrainTask("j1", 0, "w1", 100), fsm.ErrNotAssigned) // holds 2 splits
	applyOK(t, s, fsm.NewFinishSplits("j1", "w1", 0, l.Splits))
	applyOK(t, s, fsm.NewDrainTask("j1", 0, "w1", 100))
	applyOK(t, s, fsm.NewLeaseSplitsAs("j1", "w2", 300, 1, 2))
	applyOK(t, s, fsm.NewExpireWorker("w2")) // w2 dies holding 2 splits: lost

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
	if len(steps) != 2 || steps[0].Worker != "w1" || steps[1].Worker != "w2" || steps[0].Command.Type != fsm.TypeDrainTask {
		t.Fatalf("newer processes: steps %+v, want a rejoin of w1 and w2", steps)
	}
	applyErr(t, s, fsm.NewAssignTask("j1", "w2"), fsm.ErrNotAssigned)
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
	applyErr(t, s, fsm.NewRejoinTask("j1", "w1"), fsm.ErrNotAssigned) // serving: nothing to rejoin
	if steps := PlanJobWorkers(members(102, 302), v); len(steps) != 0 {
		t.Fatalf("serving workers rejoin: %+v", steps)
	}

	// Jobs whose workers are fixed take nobody back.
	s2 := newJobState(t, &fsm.JobOptions{Sharding: splits.Off, Epochs: 1})
	applyOK(t, s2, fsm.NewAssignTask("j1", "w1"))
	applyOK(t, s2, fsm.NewExpireWorker("w1"))
	v2, _ := s2.Job("j1")
	for _, st := range PlanJobWorkers(members(101, 301), v2) {
		if st.Worker == "w1" {
			t.Fatalf("an OFF job's expired worker rejoins: %+v", st)
		}
	}
	applyErr(t, s2, fsm.NewRejoinTask("j1", "w1"), fsm.ErrNotAssigned)
}
