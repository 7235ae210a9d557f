package fsmtest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// snapshot
//
// The replica restarts from a snapshot of its state: the snapshot must
// restore and encode again to the same bytes, and the script goes on
// with the restored state.
func handleSnapshot(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	b, err := e.State.MarshalSnapshot()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s, err := fsm.UnmarshalSnapshot(b)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	again, err := s.MarshalSnapshot()
	if err != nil || !bytes.Equal(again, b) {
		return fmt.Errorf("the restored state encodes differently (%v)", err)
	}
	e.State = s
	fmt.Fprintf(out, "ok: restored from a snapshot of %d jobs at index %d\n", len(s.Jobs), s.Index)
	return nil
}
