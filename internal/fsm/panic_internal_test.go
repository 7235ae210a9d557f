package fsm

import (
	"bytes"
	"errors"
	"testing"
)

// TestPanickingCommandIsRejected: a command whose handler panics is
// rejected with ErrPanicked instead of crashing the replica, the state
// does not advance to its index, and two replicas that apply the same log
// stay identical.
func TestPanickingCommandIsRejected(t *testing.T) {
	const typePanics CommandType = 999
	commandTable[typePanics] = handler{name: "Panics", minVersion: 1, maxVersion: 1, apply: func(s *State, c Command) (any, error) {
		s.KV["half"] = []byte("done") // changed before the panic: alike on every replica
		var m map[string]int
		m["x"]++ // a nil map: the kind of bug a decoded body can reach
		return nil, nil
	}}
	defer delete(commandTable, typePanics)
	log := []Command{NewPutKV("a", []byte("1")), newCommand(typePanics, 1, struct{}{}), NewPutKV("b", []byte("2"))}
	replicas := []*State{NewState(), NewState()}
	for _, s := range replicas {
		for i, c := range log {
			_, err := s.ApplyIndex(uint64(i+1), c)
			if i == 1 {
				if !errors.Is(err, ErrPanicked) {
					t.Fatalf("the panicking command applied with %v, want ErrPanicked", err)
				}
				if s.Index != 1 {
					t.Fatalf("state index %d after the rejected entry, want 1", s.Index)
				}
				continue
			}
			if err != nil {
				t.Fatalf("entry %d: %v", i+1, err)
			}
		}
	}
	a, err := replicas[0].MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := replicas[1].MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two replicas that applied the same log differ")
	}
}
