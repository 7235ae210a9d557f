package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// member id=<name> [status=alive|suspect|dead|left] [addr=<host:port>]
// [control] [incarnation=<n>] [down=<how long ago>] [role=<raft role>]
//
// Gossip's view of one member changes: a node joins, is suspected, dies
// (down= how long ago, for the voter planner's grace), leaves, or comes
// back as a newer process (incarnation=). control: it runs no tasks.
// Prints every member.
func handleMember(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	id, err := fsmtest.MustStr(d, "id")
	if err != nil {
		return err
	}
	m := e.members[id]
	m.ID, m.Worker = id, !fsmtest.Flag(d, "control")
	m.Addr = fsmtest.Str(d, "addr", id+":7000")
	statuses := map[string]MemberStatus{"alive": MemberAlive, "suspect": MemberSuspect, "dead": MemberDead, "left": MemberLeft}
	st, ok := statuses[fsmtest.Str(d, "status", "alive")]
	if !ok {
		return fmt.Errorf("status=%s: want alive, suspect, dead or left", fsmtest.Str(d, "status", ""))
	}
	m.Status = st
	inc, err := fsmtest.Int(d, "incarnation", int64(m.Incarnation))
	if err != nil {
		return err
	}
	m.Incarnation = uint64(inc)
	m.down, m.role = "", fsmtest.Str(d, "role", "")
	if st == MemberDead || st == MemberLeft {
		m.down = fsmtest.Str(d, "down", "")
	}
	e.members[id] = m
	for _, id := range slices.Sorted(maps.Keys(e.members)) {
		m := e.members[id]
		fmt.Fprintf(out, "%s %v", id, m.Status)
		if m.down != "" {
			fmt.Fprintf(out, " for %s", m.down)
		}
		if m.Incarnation != 0 {
			fmt.Fprintf(out, ", incarnation %d", m.Incarnation)
		}
		if !m.Worker {
			out.WriteString(", control only")
		}
		if m.role != "" {
			fmt.Fprintf(out, ", raft %s", m.role)
		}
		out.WriteString("\n")
	}
	return nil
}
