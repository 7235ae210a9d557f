package fsm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// TestEndTask: a failure is recorded once and kept, and survives a
// snapshot; ends are idempotent; bad commands change nothing.
func TestEndTask(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))
	applyErr(t, s, newEndTask("nope", "w1", "boom"), ErrUnknownJob)
	applyErr(t, s, newEndTask("j1", "", "boom"), ErrInvalidCommand)
	if v := applyOK(t, s, newEndTask("j1", "w9", "")); v != false { // not assigned: nothing to record
		t.Fatalf("end of an unassigned worker's task changed the job")
	}
	bad := newEndTask("j1", "w1", "x")
	bad.Body = mustBody(t, endTaskBody{Job: "j1", Worker: "w1", Failure: strings.Repeat("x", MaxFailureBytes+1)})
	applyErr(t, s, bad, ErrInvalidCommand)
	if v, _ := s.Job("j1"); v.State() != JobRunning {
		t.Fatalf("new job: %s", v.State())
	}

	if v := applyOK(t, s, at(newEndTask("j1", "w1", "read /data/a.txt: invalid UTF-8"), 5000)); v != true {
		t.Fatalf("first failure recorded = %v", v)
	}
	if v := applyOK(t, s, at(newEndTask("j1", "w1", "again"), 5500)); v != false {
		t.Fatalf("same worker again = %v", v)
	}
	if v := applyOK(t, s, at(newEndTask("j1", "w2", "later"), 6000)); v != true { // w2 ended; the failure stays w1's
		t.Fatalf("second failure = %v", v)
	}
	want := &JobFailure{Worker: "w1", Reason: "read /data/a.txt: invalid UTF-8", At: 5000}
	v, _ := s.Job("j1")
	if !reflect.DeepEqual(v.Failure, want) || v.State() != JobFailed {
		t.Fatalf("failure %+v (%s), want %+v", v.Failure, v.State(), want)
	}
	if r := snapshotRoundTrip(t, s); !reflect.DeepEqual(r.Jobs["j1"], s.Jobs["j1"]) {
		t.Fatalf("after snapshot: %+v", r.Jobs["j1"])
	}
	var fb endTaskBody
	if err := decodeBody(newEndTask("j1", "w1", strings.Repeat("é", MaxFailureBytes)), &fb); err != nil || len(fb.Failure) > MaxFailureBytes || !strings.HasSuffix(fb.Failure, "...") {
		t.Fatalf("cut failure: %d bytes, %v", len(fb.Failure), err)
	}
}

// TestJobState: DYNAMIC jobs finish when their splits are all finished or
// lost; OFF and STATIC jobs when every live worker's task has ended (an
// expired worker does not hold them up; no live worker: not finished).
func TestJobState(t *testing.T) {
	state := func(s *State, job string) string {
		t.Helper()
		v, ok := s.Job(job)
		if !ok {
			t.Fatalf("no job %s", job)
		}
		return v.State()
	}
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, LegacyCreateJob("off", "fp1", JobOptions{}, nil))
	if got := state(s, "off"); got != JobRunning {
		t.Fatalf("off job without workers: %s", got)
	}
	for _, w := range []string{"w1", "w2", "w3"} {
		applyOK(t, s, NewAssignTask("off", w))
		applyOK(t, s, NewAssignTask("j1", w))
	}
	applyOK(t, s, newEndTask("off", "w1", ""))
	applyOK(t, s, newEndTask("off", "w2", ""))
	if got := state(s, "off"); got != JobRunning {
		t.Fatalf("off job, w3 still running: %s", got)
	}
	applyOK(t, s, NewExpireWorker("w3"))
	if got := state(s, "off"); got != JobFinished {
		t.Fatalf("off job, the live workers ended: %s", got)
	}

	l := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 30)).(splits.Lease)
	applyOK(t, s, NewFinishSplits("j1", "w1", 0, l.Splits))
	applyOK(t, s, newEndTask("j1", "w1", ""))
	applyOK(t, s, newEndTask("j1", "w2", ""))
	if got := state(s, "j1"); got != JobRunning {
		t.Fatalf("dynamic job with splits left: %s", got)
	}
	l = applyOK(t, s, NewLeaseSplits("j1", "w2", 2, 30)).(splits.Lease)
	applyOK(t, s, NewFinishSplits("j1", "w2", 0, l.Splits))
	if got := state(s, "j1"); got != JobFinished {
		t.Fatalf("dynamic job, every split finished: %s", got)
	}
	// A failure on a worker the job has not assigned is the job's too.
	applyOK(t, s, newEndTask("off", "w9", "boom"))
	if got := state(s, "off"); got != JobFailed {
		t.Fatalf("off job after a failure on an unassigned worker: %s", got)
	}
}

// TestLeaseSplitsIncarnation: a worker restarted under the same name
// before it was declared dead loses its old process's leases (counted
// lost, never leased again) on its new process's first lease, stays in the
// job, and a late lease of the old process is refused.
func TestLeaseSplitsIncarnation(t *testing.T) {
	s := newJobState(t, &JobOptions{Sharding: splits.Dynamic, Epochs: 1})
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))

	l1 := applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 100, 1, 4)).(splits.Lease) // 0..3
	applyOK(t, s, NewFinishSplits("j1", "w1", 0, l1.Splits[:1]))
	// The same incarnation leases again: nothing is lost.
	l2 := applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 100, 2, 2)).(splits.Lease) // 4, 5
	if v, _ := s.Job("j1"); v.Progress.Total.Lost != 0 {
		t.Fatalf("lost %d after leases of one incarnation", v.Progress.Total.Lost)
	}
	// w1 restarts (incarnation 200): 1, 2, 3, 4, 5 are lost.
	l3 := applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 200, 1, 2)).(splits.Lease)
	if !reflect.DeepEqual(l3.Splits, []int64{6, 7}) {
		t.Fatalf("new incarnation's lease %v", l3.Splits)
	}
	v, _ := s.Job("j1")
	if v.Progress.Total.Lost != 5 || v.Progress.Outstanding != 2 || v.Workers["w1"].Expired || v.Workers["w1"].Incarnation != 200 {
		t.Fatalf("after restart: progress %+v, worker %+v", v.Progress, v.Workers["w1"])
	}
	// The old process's late requests: its lease is refused, its finish
	// finds nothing outstanding.
	applyErr(t, s, NewLeaseSplitsAs("j1", "w1", 100, 3, 2), ErrNotAssigned)
	applyErr(t, s, NewFinishSplits("j1", "w1", 0, l2.Splits), splits.ErrNotLeased)
	// Version 1 leases (and incarnation 0) leave incarnations alone; a v1
	// body may not carry one.
	applyOK(t, s, NewLeaseSplits("j1", "w2", 1, 2))
	applyOK(t, s, NewLeaseSplitsAs("j1", "w1", 0, 9, 1))
	if v, _ := s.Job("j1"); v.Progress.Total.Lost != 5 || v.Workers["w1"].Incarnation != 200 {
		t.Fatalf("after v1 leases: %+v %+v", v.Progress, v.Workers["w1"])
	}
	v1 := NewLeaseSplitsAs("j1", "w2", 7, 2, 1)
	v1.Version = 1
	applyErr(t, s, v1, ErrInvalidCommand)
}

// mustBody encodes a command body as the FSM expects it.
func mustBody(t *testing.T, body any) []byte {
	t.Helper()
	b, err := encMode.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
