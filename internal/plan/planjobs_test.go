package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/fxamacker/cbor/v2"
)

// planNow is the leader's clock in the job plan tests.
var planNow = time.Unix(100_000, 0)

// ago is planNow - d in Unix nanoseconds, the form commands carry.
func ago(d time.Duration) int64 { return planNow.Add(-d).UnixNano() }

func member(id string, st MemberStatus) JobMember {
	return JobMember{ID: id, Addr: id + ":1", Status: st, Worker: true}
}

// up lists alive worker members.
func up(ids ...string) []JobMember {
	var ms []JobMember
	for _, id := range ids {
		ms = append(ms, member(id, MemberAlive))
	}
	return ms
}

func with(ms []JobMember, more ...JobMember) []JobMember { return append(slices.Clone(ms), more...) }

var (
	dyn    = fsm.JobOptions{Sharding: splits.Dynamic}
	shared = fsm.JobOptions{Sharding: splits.Dynamic, Share: true}
)

func opts(o fsm.JobOptions, edit func(*fsm.JobOptions)) fsm.JobOptions { edit(&o); return o }

// createAt creates job name over testDataset at t (Unix nanoseconds).
func createAt(name string, o fsm.JobOptions, t int64, static ...string) fsm.Command {
	return at(fsm.LegacyCreateJob(name, "fp1", o, static), t)
}

// create creates job name a second before planNow.
func create(name string, o fsm.JobOptions, static ...string) fsm.Command {
	return createAt(name, o, ago(time.Second), static...)
}

func assigned(job string, workers ...string) []fsm.Command {
	var cs []fsm.Command
	for _, w := range workers {
		cs = append(cs, at(fsm.NewAssignTask(job, w), ago(time.Second)))
	}
	return cs
}

func cmds(groups ...any) []fsm.Command {
	var out []fsm.Command
	for _, g := range groups {
		switch g := g.(type) {
		case fsm.Command:
			out = append(out, g)
		case []fsm.Command:
			out = append(out, g...)
		default:
			panic(fmt.Sprintf("cmds: %T", g))
		}
	}
	return out
}

// The steps a plan may hold.
func expireW(w string) JobStep { return JobStep{Command: fsm.NewExpireWorker(w), Worker: w} }
func expireC() JobStep         { return JobStep{Command: fsm.NewExpireConsumers(planNow.UnixNano())} }
func gc(job string) JobStep    { return JobStep{Command: fsm.NewGarbageCollectJob(job), Job: job} }
func assign(job, w string) JobStep {
	return JobStep{Command: fsm.NewAssignTask(job, w), Job: job, Worker: w}
}

// stepsString renders steps for failure messages.
func stepsString(steps []JobStep) string {
	var s []string
	for _, st := range steps {
		switch st.Command.Type {
		case fsm.TypeExpireConsumers:
			var b struct {
				Now int64 `cbor:"1,keyasint"`
			}
			_ = cbor.Unmarshal(st.Command.Body, &b)
			s = append(s, fmt.Sprintf("ExpireConsumers(%d)", b.Now))
		default:
			s = append(s, fmt.Sprintf("%v(%s/%s)", st.Command.Type, st.Job, st.Worker))
		}
	}
	return fmt.Sprint(s)
}

// planState builds the state the cases start from: testDataset registered,
// then setup applied through the FSM's apply path.
func planState(t *testing.T, setup []fsm.Command) *fsm.State {
	t.Helper()
	s := newJobState(t, nil)
	for _, c := range setup {
		applyOK(t, s, c)
	}
	return s
}

// planJobsCase is one case of TestPlanJobsTable: a state set up by
// commands, gossip's members, and the steps PlanJobs must return.
type planJobsCase struct {
	name    string
	setup   []fsm.Command
	members []JobMember
	want    []JobStep
}

// Shorthands of TestPlanJobsTable's cases.
var (
	caseMinute      = func(o *fsm.JobOptions) { o.GCAfter = time.Minute }
	caseCapped      = func(n int) fsm.JobOptions { return opts(dyn, func(o *fsm.JobOptions) { o.MaxWorkers = n }) }
	caseStatic      = opts(dyn, func(o *fsm.JobOptions) { o.Sharding = splits.Static })
	caseCoordinated = opts(dyn, func(o *fsm.JobOptions) { o.Coordinated, o.NumConsumers = true, 2 })
	caseControl     = JobMember{ID: "c1", Addr: "c1:1", Status: MemberAlive}
	caseNoAddr      = JobMember{ID: "w1", Status: MemberAlive, Worker: true}
)

// planJobsCases are TestPlanJobsTable's cases.
var planJobsCases = []planJobsCase{
	// Nothing to do; consumer leases are expired whenever a job exists.
	{"no jobs", nil, with(up("w1"), member("w2", MemberDead)), nil},
	{"no members", cmds(create("j1", dyn)), nil, []JobStep{expireC()}},

	// New workers join.
	{"new job gets every live worker, by name", cmds(create("j1", dyn)), up("w2", "w3", "w1"),
		[]JobStep{expireC(), assign("j1", "w1"), assign("j1", "w2"), assign("j1", "w3")}},
	{"assigned workers are left alone", cmds(create("j1", dyn), assigned("j1", "w1")), up("w1", "w2"),
		[]JobStep{expireC(), assign("j1", "w2")}},
	{"off job is assigned like dynamic", cmds(create("j1", fsm.JobOptions{})), up("w1"),
		[]JobStep{expireC(), assign("j1", "w1")}},
	{"several jobs, by name", cmds(create("b", dyn), create("a", dyn)), up("w1"),
		[]JobStep{expireC(), assign("a", "w1"), assign("b", "w1")}},
	{"control-only and address-less members get no task", cmds(create("j1", dyn)),
		with(up("w2"), caseControl, caseNoAddr), []JobStep{expireC(), assign("j1", "w2")}},
	{"a member listed twice is assigned once", cmds(create("j1", dyn)), with(up("w1"), member("w1", MemberAlive)),
		[]JobStep{expireC(), assign("j1", "w1")}},

	// Dead workers are expired.
	{"dead worker expired, not reassigned", cmds(create("j1", dyn), assigned("j1", "w1", "w2")),
		with(up("w1"), member("w2", MemberDead)), []JobStep{expireW("w2"), expireC()}},
	{"left worker expired", cmds(create("j1", dyn), assigned("j1", "w1")),
		[]JobMember{member("w1", MemberLeft)}, []JobStep{expireW("w1"), expireC()}},
	{"dead worker without an address still expired", cmds(create("j1", dyn), assigned("j1", "w1")),
		[]JobMember{{ID: "w1", Status: MemberDead, Worker: true}}, []JobStep{expireW("w1"), expireC()}},
	{"suspect worker neither expired nor given a task", cmds(create("j1", dyn), assigned("j1", "w1")),
		[]JobMember{member("w1", MemberSuspect), member("w2", MemberSuspect)}, []JobStep{expireC()}},
	{"status unknown: neither", cmds(create("j1", dyn), assigned("j1", "w1")),
		[]JobMember{member("w1", 0), member("w2", 0)}, []JobStep{expireC()}},
	{"worker already expired is not expired again", cmds(create("j1", dyn), assigned("j1", "w1"), fsm.NewExpireWorker("w1")),
		[]JobMember{member("w1", MemberDead)}, []JobStep{expireC()}},
	{"dead member that never worked on a job", cmds(create("j1", dyn)),
		[]JobMember{member("w5", MemberDead)}, []JobStep{expireC()}},
	// An expired worker is out of the job for good: its consumers
	// dropped it, so splits it leased again would be read by nobody.
	{"expired worker alive again stays out of the job", cmds(create("j1", dyn), assigned("j1", "w1"), fsm.NewExpireWorker("w1")),
		up("w1"), []JobStep{expireC()}},
	{"expired worker alive again gets the jobs it never had", cmds(create("a", dyn), assigned("a", "w1"), fsm.NewExpireWorker("w1"), create("b", dyn)),
		up("w1"), []JobStep{expireC(), assign("b", "w1")}},
	{"expired worker alive again stays out of a caseCoordinated job's rotation",
		cmds(create("c", opts(dyn, func(o *fsm.JobOptions) { o.Coordinated, o.NumConsumers = true, 2 })), assigned("c", "w1", "w2"), fsm.NewExpireWorker("w2")),
		up("w1", "w2"), []JobStep{expireC()}},
	{"expired worker alive again, revived by an older log's AssignTask v1, is left alone",
		cmds(create("j1", dyn), assigned("j1", "w1"), fsm.NewExpireWorker("w1"), assignV1("j1", "w1")),
		up("w1"), []JobStep{expireC()}},
	{"worker dead in several jobs expired once, first job's order first",
		cmds(create("a", dyn), create("b", dyn), assigned("a", "w9"), assigned("b", "w1", "w9")),
		[]JobMember{member("w1", MemberDead), member("w9", MemberDead)},
		[]JobStep{expireW("w9"), expireW("w1"), expireC()}},

	// MaxWorkers.
	{"max workers caps new workers", cmds(create("j1", caseCapped(2)), assigned("j1", "w1")), up("w1", "w2", "w3"),
		[]JobStep{expireC(), assign("j1", "w2")}},
	{"max workers reached", cmds(create("j1", caseCapped(2)), assigned("j1", "w1", "w2")), up("w1", "w2", "w3"),
		[]JobStep{expireC()}},
	{"a dead worker frees its slot in the same pass", cmds(create("j1", caseCapped(2)), assigned("j1", "w1", "w2")),
		with(up("w1", "w3"), member("w2", MemberDead)), []JobStep{expireW("w2"), expireC(), assign("j1", "w3")}},
	{"expired workers do not count", cmds(create("j1", caseCapped(1)), assigned("j1", "w1"), fsm.NewExpireWorker("w1")),
		up("w2"), []JobStep{expireC(), assign("j1", "w2")}},
	{"a suspect worker keeps its slot", cmds(create("j1", caseCapped(1)), assigned("j1", "w1")),
		with(up("w2"), member("w1", MemberSuspect)), []JobStep{expireC()}},
	{"caps are per job", cmds(create("a", caseCapped(1)), create("b", caseCapped(2))), up("w1", "w2", "w3"),
		[]JobStep{expireC(), assign("a", "w1"), assign("b", "w1"), assign("b", "w2")}},

	// STATIC jobs keep the workers agreed at creation.
	{"static job gets no new worker", cmds(create("j1", caseStatic, "w1"), assigned("j1", "w1")), up("w1", "w2"),
		[]JobStep{expireC()}},
	{"static worker not yet assigned is not assigned by the loop", cmds(create("j1", caseStatic, "w1", "w2")), up("w1", "w2"),
		[]JobStep{expireC()}},
	{"static job's dead worker is expired", cmds(create("j1", caseStatic, "w1", "w2"), assigned("j1", "w1", "w2")),
		with(up("w1"), member("w2", MemberDead)), []JobStep{expireW("w2"), expireC()}},

	// Garbage collection: after GCAfter without consumers, not before.
	{"collected after gc_after without consumers", cmds(createAt("j1", dyn, ago(fsm.DefaultGCAfter+1))), up("w1"),
		[]JobStep{expireC(), gc("j1")}},
	{"not collected at exactly gc_after", cmds(createAt("j1", dyn, ago(fsm.DefaultGCAfter))), up("w1"),
		[]JobStep{expireC(), assign("j1", "w1")}},
	{"custom gc_after", cmds(createAt("j1", opts(dyn, caseMinute), ago(time.Minute+time.Second))), nil,
		[]JobStep{expireC(), gc("j1")}},
	{"a job with a consumer is kept", cmds(createAt("j1", dyn, ago(time.Hour)), at(fsm.NewAttachConsumer("j1", "c1"), ago(time.Second))),
		up("w1"), []JobStep{expireC(), assign("j1", "w1")}},
	{"lease ran out long ago: expired and collected in one pass",
		cmds(createAt("j1", opts(dyn, caseMinute), ago(time.Hour)), at(fsm.NewAttachConsumer("j1", "c1"), ago(10*time.Minute))),
		up("w1"), []JobStep{expireC(), gc("j1")}},
	{"lease ran out recently: not collected yet",
		cmds(createAt("j1", opts(dyn, caseMinute), ago(time.Hour)), at(fsm.NewAttachConsumer("j1", "c1"), ago(40*time.Second))),
		up("w1"), []JobStep{expireC(), assign("j1", "w1")}},
	{"last consumer detached long ago",
		cmds(createAt("j1", opts(dyn, caseMinute), ago(time.Hour)), at(fsm.NewAttachConsumer("j1", "c1"), ago(time.Hour)),
			at(fsm.NewDetachConsumer("j1", "c1"), ago(2*time.Minute))),
		nil, []JobStep{expireC(), gc("j1")}},
	{"collected job gets no worker, the others do", cmds(createAt("a", dyn, ago(time.Hour)), create("b", dyn)), up("w1"),
		[]JobStep{expireC(), gc("a"), assign("b", "w1")}},
	{"dead worker of a collected job is expired first",
		cmds(createAt("a", dyn, ago(time.Hour)), assigned("a", "w1")),
		[]JobMember{member("w1", MemberDead)}, []JobStep{expireW("w1"), expireC(), gc("a")}},

	// Share groups: never collected or assigned by the plan, but their
	// workers are expired like any job's.
	{"sharing jobs are assigned, their group is not", cmds(create("a", shared), create("b", shared)), up("w1"),
		[]JobStep{expireC(), assign("a", "w1"), assign("b", "w1")}},
	{"sharing job collected, its group left to the state machine", cmds(createAt("a", shared, ago(time.Hour))), nil,
		[]JobStep{expireC(), gc("a")}},
	{"worker left only in a share group is expired",
		cmds(createAt("a", opts(shared, caseMinute), ago(time.Hour)), create("b", shared), assigned("a", "w1"),
			at(fsm.NewGarbageCollectJob("a"), ago(time.Minute))),
		[]JobMember{member("w1", MemberDead)}, []JobStep{expireW("w1"), expireC()}},

	// Coordinated jobs are assigned like any job; the rotation changes
	// inside AssignTask and ExpireWorker (TestPlanJobsCoordinatedRotation).
	{"coordinated job", cmds(create("c", caseCoordinated), assigned("c", "w1", "w2")),
		with(up("w1", "w3"), member("w2", MemberDead)), []JobStep{expireW("w2"), expireC(), assign("c", "w3")}},
}

func TestPlanJobsTable(t *testing.T) {
	for _, tc := range planJobsCases {
		t.Run(tc.name, func(t *testing.T) {
			s := planState(t, tc.setup)
			before := s.Clone()
			got := PlanJobs(planNow, tc.members, s.JobList())
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %s\nwant %s", stepsString(got), stepsString(tc.want))
			}
			if !reflect.DeepEqual(s, before) {
				t.Fatal("PlanJobs changed the state it was given")
			}
		})
	}
}

func TestPlanJobWorkers(t *testing.T) {
	capped := opts(dyn, func(o *fsm.JobOptions) { o.MaxWorkers = 2 })
	s := planState(t, cmds(create("d", dyn), create("m", capped), assigned("m", "w1"),
		create("st", opts(dyn, func(o *fsm.JobOptions) { o.Sharding = splits.Static }), "w1", "w2"),
		create("sh", shared)))
	job := func(name string) fsm.JobView {
		v, ok := s.Job(name)
		if !ok {
			t.Fatalf("no job %q", name)
		}
		return v
	}
	group := job("sh").ShareGroup
	members := with(up("w3", "w1", "w2"), member("w4", MemberDead), member("w5", MemberSuspect))
	cases := []struct {
		job  string
		want []JobStep
	}{
		{"d", []JobStep{assign("d", "w1"), assign("d", "w2"), assign("d", "w3")}},
		{"m", []JobStep{assign("m", "w2")}},
		{"st", nil},
		{"sh", []JobStep{assign("sh", "w1"), assign("sh", "w2"), assign("sh", "w3")}},
		{group, nil},
	}
	for _, tc := range cases {
		if got := PlanJobWorkers(members, job(tc.job)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %s, want %s", tc.job, stepsString(got), stepsString(tc.want))
		}
	}
}

func TestAssignableWorkers(t *testing.T) {
	members := []JobMember{
		member("w3", MemberAlive), member("w1", MemberAlive), member("w2", MemberSuspect),
		member("w4", MemberDead), member("w5", MemberLeft), member("w6", 0), member("w1", MemberAlive),
		{ID: "c1", Addr: "c1:1", Status: MemberAlive}, {ID: "w0", Status: MemberAlive, Worker: true},
		member("w7", MemberAlive),
	}
	cases := []struct {
		max  int
		want []string
	}{
		{0, []string{"w1", "w3", "w7"}},
		{2, []string{"w1", "w3"}},
		{3, []string{"w1", "w3", "w7"}},
		{9, []string{"w1", "w3", "w7"}},
	}
	for _, tc := range cases {
		if got := AssignableWorkers(members, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("max %d: got %v, want %v", tc.max, got, tc.want)
		}
	}
	if got := AssignableWorkers(nil, 0); got != nil {
		t.Errorf("no members: %v", got)
	}
}

// The plan decides who works on a coordinated job; the state machine moves
// the rotation, from an agreed future round once consumers have started.
func TestPlanJobsCoordinatedRotation(t *testing.T) {
	coordinated := opts(dyn, func(o *fsm.JobOptions) { o.Coordinated, o.NumConsumers = true, 2 })
	s := planState(t, cmds(create("c", coordinated), assigned("c", "w1", "w2"), fsm.NewReportRound("c", 0, 10)))
	members := with(up("w1", "w3"), member("w2", MemberDead))
	plan := PlanJobs(planNow, members, s.JobList())
	want := []JobStep{expireW("w2"), expireC(), assign("c", "w3")}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("got %s, want %s", stepsString(plan), stepsString(want))
	}
	for _, st := range plan {
		applyOK(t, s, at(st.Command, planNow.UnixNano()))
	}
	r := s.Jobs["c"].Rounds
	if cur := r.Schedule.Current(); !slices.Equal(cur, []string{"w1", "w3"}) {
		t.Fatalf("rotation %v after the plan, want [w1 w3]", cur)
	}
	if from := r.Schedule.LastFrom(); from < 10+fsm.RoundLookahead {
		t.Fatalf("rotation changed from round %d, before the agreed %d", from, 10+fsm.RoundLookahead)
	}
	if again := PlanJobs(planNow, members, s.JobList()); !reflect.DeepEqual(again, []JobStep{expireC()}) {
		t.Fatalf("second pass: %s", stepsString(again))
	}
}

// TestPlanJobsProperties plans over random states and members: the plan does
// not depend on the order of its inputs, the state machine accepts every
// step, and once applied, a second pass at the same time has nothing left
// to do but expire consumers.
func TestPlanJobsProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 3))
	for iter := range 2000 {
		s, members := randomJobs(t, r)
		jobs := s.JobList()
		plan := PlanJobs(planNow, members, jobs)

		m2, j2 := slices.Clone(members), slices.Clone(jobs)
		r.Shuffle(len(m2), func(i, j int) { m2[i], m2[j] = m2[j], m2[i] })
		r.Shuffle(len(j2), func(i, j int) { j2[i], j2[j] = j2[j], j2[i] })
		if again := PlanJobs(planNow, m2, j2); !reflect.DeepEqual(again, plan) {
			t.Fatalf("iter %d: plan depends on input order:\n%s\n%s", iter, stepsString(plan), stepsString(again))
		}
		for _, st := range plan {
			if _, err := s.Apply(at(st.Command, planNow.UnixNano())); err != nil {
				t.Fatalf("iter %d: step %s rejected: %v (plan %s)", iter, stepsString([]JobStep{st}), err, stepsString(plan))
			}
		}
		want := []JobStep{expireC()}
		if len(s.Jobs) == 0 {
			want = nil
		}
		if again := PlanJobs(planNow, members, s.JobList()); !reflect.DeepEqual(again, want) {
			t.Fatalf("iter %d: second pass %s after %s", iter, stepsString(again), stepsString(plan))
		}
	}
}

func randomJobs(t *testing.T, r *rand.Rand) (*fsm.State, []JobMember) {
	t.Helper()
	s := newJobState(t, nil)
	workers := []string{"w0", "w1", "w2", "w3", "w4", "w5"}
	randTime := func() int64 { return ago(time.Duration(r.IntN(20*60)) * time.Second) }
	for i := range r.IntN(5) {
		name := fmt.Sprintf("j%d", i)
		o := fsm.JobOptions{Sharding: splits.Policy(r.IntN(3)), MaxWorkers: r.IntN(4), GCAfter: time.Duration(1+r.IntN(600)) * time.Second}
		if o.Sharding == splits.Dynamic {
			switch r.IntN(3) {
			case 0:
				o.Share = true
			case 1:
				o.Coordinated, o.NumConsumers = true, 1+r.IntN(3)
			}
		}
		var static []string
		if o.Sharding == splits.Static {
			static = workers[:1+r.IntN(len(workers))]
		}
		mustApply(t, s, createAt(name, o, randTime(), static...))
		for _, w := range workers {
			if r.IntN(2) == 0 {
				_, _ = s.Apply(at(fsm.NewAssignTask(name, w), randTime())) // may be over MaxWorkers
			}
		}
		for c := range r.IntN(3) {
			_, _ = s.Apply(at(fsm.NewAttachConsumer(name, fmt.Sprintf("c%d", c)), randTime()))
		}
		if r.IntN(4) == 0 {
			_, _ = s.Apply(at(fsm.NewDetachConsumer(name, "c0"), randTime()))
		}
	}
	for _, w := range workers {
		if r.IntN(4) == 0 {
			mustApply(t, s, fsm.NewExpireWorker(w))
		}
	}
	var members []JobMember
	for _, w := range workers {
		if r.IntN(6) == 0 {
			continue // not in gossip
		}
		m := member(w, MemberStatus(r.IntN(5)))
		if r.IntN(8) == 0 {
			m.Worker = false
		}
		members = append(members, m)
	}
	return s, members
}

// TestPlanJobsExpiresSupersededProcess: a node restarted so quickly that
// gossip never held it left runs a newer process than the one that leased
// in a job. Nothing would expire the old process (its new one starts a
// task only when a consumer opens a stream, and a consumer whose streams
// the old process ended for its drain waits for the job to take the
// worker back), so the plan expires it there (ExpireWorker v2) and
// rejoins it in the same pass. A worker whose process leased in the job
// is left alone, as is one that never leased, and a coordinated job (it
// takes no worker back: the new process's first lease settles the old
// one's there).
func TestPlanJobsExpiresSupersededProcess(t *testing.T) {
	s := newJobState(t, nil)
	mustApply(t, s, create("a", dyn))
	mustApply(t, s, create("r", opts(dyn, func(o *fsm.JobOptions) { o.Coordinated, o.NumConsumers = true, 1 })))
	for _, c := range append(assigned("a", "w1", "w2", "w3"), assigned("r", "w1", "w2", "w3")...) {
		mustApply(t, s, c)
	}
	mustApply(t, s, at(fsm.NewAttachConsumer("a", "c1"), ago(time.Second)))
	mustApply(t, s, at(fsm.NewAttachConsumer("r", "c2"), ago(time.Second)))
	mustApply(t, s, fsm.NewLeaseSplitsAs("a", "w1", 100, 1, 2))
	mustApply(t, s, fsm.NewLeaseSplitsAs("a", "w2", 200, 1, 2))
	mustApply(t, s, fsm.NewLeaseSplitsAs("r", "w1", 100, 1, 1))
	members := up("w1", "w2", "w3")
	members[0].Incarnation, members[1].Incarnation, members[2].Incarnation = 150, 200, 300
	plan := PlanJobs(planNow, members, s.JobList())
	var got []string
	for _, st := range plan {
		got = append(got, fmt.Sprintf("%d/v%d %s %s", st.Command.Type, st.Command.Version, st.Job, st.Worker))
		if _, err := s.Apply(at(st.Command, planNow.UnixNano())); err != nil {
			t.Fatalf("step %s rejected: %v", stepsString([]JobStep{st}), err)
		}
	}
	want := []string{
		fmt.Sprintf("%d/v2  w1", fsm.TypeExpireWorker),
		fmt.Sprintf("%d/v1  ", fsm.TypeExpireConsumers),
		fmt.Sprintf("%d/v2 a w1", fsm.TypeDrainTask),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan %v, want %v", got, want)
	}
	a, r := s.Jobs["a"], s.Jobs["r"]
	if st := a.Workers["w1"]; st.Expired || st.Since != planNow.UnixNano() || st.Incarnation != 100 {
		t.Errorf("w1 in a: %+v, want rejoined with its last incarnation", st)
	}
	if held := a.Dynamic.Held()["w1"]; held != 0 {
		t.Errorf("w1 still holds %d splits of a: the old process's leases were not expired", held)
	}
	if st := a.Workers["w2"]; st.Expired || st.Incarnation != 200 {
		t.Errorf("w2 (its process leased) touched: %+v", st)
	}
	if st := r.Workers["w1"]; st.Expired {
		t.Errorf("w1 expired from the coordinated job: %+v", st)
	}
	if again := PlanJobs(planNow, members, s.JobList()); !reflect.DeepEqual(again, []JobStep{expireC()}) {
		t.Errorf("second pass %s", stepsString(again))
	}
	v1 := fsm.NewExpireSuperseded("w1", 5)
	v1.Version = 1
	if _, err := s.Apply(v1); err == nil {
		t.Errorf("ExpireWorker v1 with an incarnation accepted")
	}
}
