package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
)

// scriptEnv is what the leader plans from: gossip's members, the Raft
// configuration, the replicated jobs (an fsmtest.Env, which also runs the
// state machine's own commands) and, for the policy's scripts, one job's
// autoscaling state.
type scriptEnv struct {
	*fsmtest.Env
	members map[string]scriptMember
	config  []ConfigServer
	leader  string
	scale   autoscale.State
	policy  autoscale.Config
}

// scriptMember is one member as gossip tells of it, for both planners.
type scriptMember struct {
	JobMember
	down string // how long ago gossip declared it dead ("" alive)
	role string // the Raft role it advertises
}

func newScriptEnv() *scriptEnv {
	return &scriptEnv{Env: fsmtest.New(), members: map[string]scriptMember{}, scale: autoscale.NewState(), policy: autoscale.DefaultConfig()}
}

// scriptHandler runs one planner command, writing its output to out.
type scriptHandler func(e *scriptEnv, d *datadriven.TestData, out *strings.Builder) error

// planHandlers are the planner's commands; each is in its own file
// (script_<command>_test.go). Every other command is the state
// machine's (fsmtest).
var planHandlers = map[string]scriptHandler{
	"member":           handleMember,
	"config":           handleConfig,
	"plan-voters":      handlePlanVoters,
	"bootstrap":        handleBootstrap,
	"plan-jobs":        handlePlanJobs,
	"policy":           handlePolicy,
	"metric":           handleMetric,
	"allocate-workers": handleAllocateWorkers,
}

func (e *scriptEnv) handle(t *testing.T, d *datadriven.TestData) string {
	h, ok := planHandlers[d.Cmd]
	if !ok {
		return e.Env.Handle(t, d)
	}
	var out strings.Builder
	if err := h(e, d, &out); err != nil {
		t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
	}
	return out.String()
}

// jobMembers and raftMembers are the members as each planner takes them.
func (e *scriptEnv) jobMembers() []JobMember {
	var out []JobMember
	for _, id := range slices.Sorted(maps.Keys(e.members)) {
		out = append(out, e.members[id].JobMember)
	}
	return out
}

func (e *scriptEnv) raftMembers() ([]Member, error) {
	var out []Member
	for _, id := range slices.Sorted(maps.Keys(e.members)) {
		m := e.members[id]
		rm := Member{ID: m.ID, Addr: m.Addr, Alive: m.Status == MemberAlive || m.Status == MemberSuspect, Role: m.role}
		if m.down != "" {
			ago, err := parseAgo(m.down)
			if err != nil {
				return nil, err
			}
			rm.DownSince = e.Now.Add(-ago)
		}
		out = append(out, rm)
	}
	return out, nil
}

// configString renders the configuration: "a (leader), b, c; nonvoters d".
func (e *scriptEnv) configString() string {
	var voters, others []string
	for _, s := range e.config {
		name := s.ID
		if s.ID == e.leader {
			name += " (leader)"
		}
		if s.Suffrage == SuffrageVoter {
			voters = append(voters, name)
		} else {
			others = append(others, name)
		}
	}
	s := "voters " + strings.Join(voters, ", ")
	if len(others) > 0 {
		s += "; nonvoters " + strings.Join(others, ", ")
	}
	return s
}

// step renders a job plan's step as the leader would log it.
func step(st JobStep) string {
	s := fmt.Sprintf("%v", st.Command.Type)
	for _, p := range []string{st.Job, st.Worker} {
		if p != "" {
			s += " " + p
		}
	}
	if d := stepDetail(st); d != "" {
		s += " (" + d + ")"
	}
	return s
}
