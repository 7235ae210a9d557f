package mesh

import (
	"errors"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// TestHandBackRefusalCrossesTheWire: the leader's refusal of a hand-back
// (nothing changed: the draining worker reads the splits itself) has its
// own code and is not retried, so a worker never takes another failure,
// whose outcome is unknown, for it.
func TestHandBackRefusalCrossesTheWire(t *testing.T) {
	s := fsm.NewState()
	if _, err := s.Apply(fsm.NewRegisterDataset(fsm.Dataset{Fingerprint: "fp", Spec: []byte("s"), NumSplits: 4})); err != nil {
		t.Fatal(err)
	}
	for _, c := range []fsm.Command{
		fsm.LegacyCreateJob("j", "fp", fsm.JobOptions{Sharding: splits.Dynamic, Epochs: 1}, nil),
		fsm.NewAssignTask("j", "w1"),
		fsm.NewLeaseSplits("j", "w1", 1, 2),
	} {
		if _, err := s.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Apply(fsm.NewHandBackSplits("j", 0, "w1", 0, []int64{0, 1})) // w1 is the only worker
	wire := mapRaftErr(err)
	if !errors.Is(wire, api.ErrHandBackRefused) || retriable(wire) {
		t.Fatalf("refusal %v maps to %v (retriable %v): want ErrHandBackRefused, not retried", err, wire, retriable(wire))
	}
	if _, err := s.Apply(fsm.NewAssignTask("j", "w2")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Apply(fsm.NewHandBackSplits("j", 0, "w1", 0, []int64{3})) // not leased: another failure
	if errors.Is(mapRaftErr(err), api.ErrHandBackRefused) {
		t.Fatalf("a hand-back of a split not leased maps to the refusal: %v", err)
	}
}
