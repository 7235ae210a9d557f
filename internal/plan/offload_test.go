package plan

import (
	"testing"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// TestNoWorkersWhileRemoteOff: while a consumer keeps the nodes from
// taking a job's splits (fsm's Offload with RemoteOff), the leader
// assigns the job no node (the state machine's half of the rule is in
// fsm's TestOffloadCommands).
func TestNoWorkersWhileRemoteOff(t *testing.T) {
	s := newJobState(t, &fsm.JobOptions{Sharding: splits.Dynamic, Epochs: 1, Delivery: fsm.DeliveryExactlyOnce})
	applyOK(t, s, fsm.NewAttachConsumer("j1", "c1"))
	applyOK(t, s, fsm.NewAssignTask("j1", "w1"))
	member := []JobMember{{ID: "w2", Addr: "a", Worker: true, Status: MemberAlive}}
	v, _ := s.Job("j1")
	if steps := PlanJobWorkers(member, v); len(steps) != 1 {
		t.Fatalf("assignments with the nodes' part on: %+v, want w2's", steps)
	}
	applyOK(t, s, fsm.NewOffload(fsm.OffloadBody{Job: "j1", Consumer: "c1", LocalWorker: true, Remote: fsm.RemoteOff}))
	v, _ = s.Job("j1")
	if steps := PlanJobWorkers(member, v); len(steps) != 0 {
		t.Fatalf("assignments with the nodes' part off: %+v", steps)
	}
}
