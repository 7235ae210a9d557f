package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// plan-voters [target=<n>] [grace=<duration>] [apply]
//
// PlanVoters at the clock's now: the changes toward the voter target (0
// or absent: VoterTarget's choice), and with apply, the configuration
// once they are made (as the mesh makes them, in order).
func handlePlanVoters(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	target, err := fsmtest.Int(d, "target", AutoVoters)
	if err != nil {
		return err
	}
	grace, err := fsmtest.Duration(d, "grace", time.Minute)
	if err != nil {
		return err
	}
	members, err := e.raftMembers()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "target %d\n", VoterTarget(int(target), e.leader, e.config, members))
	changes := PlanVoters(int(target), grace, e.Now, e.leader, e.config, members)
	if len(changes) == 0 {
		out.WriteString("no change\n")
	}
	for _, c := range changes {
		fmt.Fprintf(out, "%v %s\n", c.Kind, c.Server.ID)
		if !fsmtest.Flag(d, "apply") {
			continue
		}
		e.config = slices.DeleteFunc(e.config, func(s ConfigServer) bool { return s.ID == c.Server.ID })
		if c.Kind == AddVoter {
			e.config = append(e.config, ConfigServer{ID: c.Server.ID, Addr: c.Server.Addr, Suffrage: SuffrageVoter})
		}
	}
	if fsmtest.Flag(d, "apply") {
		fmt.Fprintf(out, "config: %s\n", e.configString())
	}
	return nil
}
