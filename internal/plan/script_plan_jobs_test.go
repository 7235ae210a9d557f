package plan

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// plan-jobs [apply]
//
// PlanJobs at the clock's now over gossip's members and every job: the
// steps of one pass of the leader's job upkeep, and with apply, each
// step applied in order as the mesh applies them (a failed AssignTask
// ends its job's assignments), followed by the jobs they leave.
func handlePlanJobs(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error {
	steps := PlanJobs(e.Now, e.jobMembers(), e.State.JobList())
	if len(steps) == 0 {
		out.WriteString("no step\n")
	}
	stopped := map[string]bool{}
	for _, st := range steps {
		fmt.Fprintf(out, "%s", step(st))
		if !fsmtest.Flag(d, "apply") {
			out.WriteString("\n")
			continue
		}
		if st.Command.Type == fsm.TypeAssignTask && stopped[st.Job] {
			out.WriteString(": skipped\n")
			continue
		}
		if _, err := e.Apply(st.Command); err != nil {
			fmt.Fprintf(out, ": refused: %v\n", err)
			stopped[st.Job] = st.Command.Type == fsm.TypeAssignTask
			continue
		}
		out.WriteString("\n")
	}
	if fsmtest.Flag(d, "apply") {
		for _, v := range e.State.JobList() {
			if !v.Group {
				out.WriteString(e.Job(v.Name))
			}
		}
	}
	return nil
}
