package plan

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// TestResumeJobWaits: a resumed job waits for every consumer's
// checkpoint, getting no worker meanwhile; the last starts it; a new one
// after that is refused; one already in is a no-op while consumers are
// attached.
func TestResumeJobWaits(t *testing.T) {
	s := newJobState(t, nil)
	members := up("w1", "w2")
	pa := ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {0: ranges.Span(0, 3)}}}
	pb := ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {0: ranges.Span(3, 5), 1: ranges.Span(0, 2)}}}
	idx := s.Index + 1
	id := applyOK(t, s, resume("j1", 7, "a", 2, pa))
	if id != idx {
		t.Fatalf("id %v, want the log index %d", id, idx)
	}
	j := s.Jobs["j1"]
	if r := j.Dynamic.Resume; !j.Dynamic.Waiting() || r.From != 7 || r.Want != 2 || !slices.Equal(r.Parts, []string{"a"}) {
		t.Fatalf("resumed job %+v", j.Dynamic.Resume)
	}
	if got := PlanJobs(planNow, members, s.JobList()); !reflect.DeepEqual(got, []JobStep{expireC()}) {
		t.Fatalf("plan while waiting: %s", stepsString(got))
	}
	v, _ := s.Job("j1")
	if got := PlanJobWorkers(members, v); got != nil {
		t.Fatalf("workers planned while waiting: %s", stepsString(got))
	}
	if v.Progress.Exact.ResumeWant != 2 || v.Progress.Exact.ResumeHave != 1 || v.Progress.Exact.ResumeFrom != 7 || v.State() != fsm.JobRunning {
		t.Fatalf("progress while waiting %+v, state %s", v.Progress.Exact, v.State())
	}
	// A worker assigned anyway (a consumer's stream) gets nothing yet.
	applyOK(t, s, fsm.NewAssignTask("j1", "w0"))
	if l := applyOK(t, s, fsm.NewLeaseSplitsOfJob("j1", idx, "w0", 0, 1, 8)).(splits.Lease); len(l.Splits) != 0 || l.Done {
		t.Fatalf("lease while waiting: %+v", l)
	}
	snapshotRoundTrip(t, s)

	// The same part again: no change.
	before := s.Jobs["j1"].Clone()
	if again := applyOK(t, s, resume("j1", 7, "a", 2, pb)); again != id {
		t.Fatalf("part again: id %v, want %v", again, id)
	}
	if !reflect.DeepEqual(s.Jobs["j1"], before) {
		t.Fatal("a part already in changed the job")
	}
	// An invalid part is refused and changes nothing.
	bad := ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {testDataset.NumSplits: ranges.Span(0, 1)}}}
	applyErr(t, s, resume("j1", 7, "b", 2, bad), fsm.ErrInvalidCommand)

	// The second part starts it.
	if got := applyOK(t, s, resume("j1", 7, "b", 2, pb)); got != id {
		t.Fatalf("second part: id %v, want %v", got, id)
	}
	j = s.Jobs["j1"]
	if j.Dynamic.Waiting() || !slices.Equal(j.Dynamic.Resume.Parts, []string{"a", "b"}) {
		t.Fatalf("after the second part: %+v", j.Dynamic.Resume)
	}
	want := ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {0: ranges.Span(0, 5), 1: ranges.Span(0, 2)}}}
	if !reflect.DeepEqual(j.Dynamic.Resume.Prior, want) {
		t.Fatalf("prior %+v, want %+v", j.Dynamic.Resume.Prior, want)
	}
	if got := PlanJobs(planNow, members, s.JobList()); !reflect.DeepEqual(got, []JobStep{expireC(), assign("j1", "w1"), assign("j1", "w2")}) {
		t.Fatalf("plan once started: %s", stepsString(got))
	}
	l := applyOK(t, s, fsm.NewLeaseSplitsOfJob("j1", idx, "w0", 0, 2, 2)).(splits.Lease)
	if !slices.Equal(l.Splits, []int64{0, 1}) || len(l.Exclude) != 2 || !slices.Equal(l.Exclude[0], ranges.Span(0, 5)) || !slices.Equal(l.Exclude[1], ranges.Span(0, 2)) {
		t.Fatalf("first lease: %+v", l)
	}
	snapshotRoundTrip(t, s)

	// Consumers attach. A part that was not in is refused now, whatever
	// its count; one that was in (a consumer joining again) is a no-op.
	applyOK(t, s, at(fsm.NewAttachConsumer("j1", "a2"), ago(time.Second)))
	err := applyErr(t, s, resume("j1", 7, "c", 3, ranges.Delivered{}), fsm.ErrJobInUse)
	if !strings.Contains(err.Error(), "read by 1 consumer(s)") || !strings.Contains(err.Error(), "came after it started") {
		t.Fatalf("message %q does not name the consumers", err)
	}
	before = s.Jobs["j1"].Clone()
	if again := applyOK(t, s, resume("j1", 7, "b", 2, pb)); again != id {
		t.Fatalf("part again after the start: id %v, want %v", again, id)
	}
	if !reflect.DeepEqual(s.Jobs["j1"], before) {
		t.Fatal("a part already in changed the started job")
	}
	snapshotRoundTrip(t, s)

	// Every consumer gone: the same checkpoints resume the job anew
	// (a new ID, waiting again).
	applyOK(t, s, fsm.NewDetachConsumer("j1", "a2"))
	idx2 := s.Index + 1
	if id2 := applyOK(t, s, resume("j1", 7, "a", 2, pa)); id2 != idx2 || id2 == id {
		t.Fatalf("resume again: id %v, want %d", id2, idx2)
	}
	if j := s.Jobs["j1"]; !j.Dynamic.Waiting() || len(j.Workers) != 0 || j.Dynamic.Total.Leased != 0 {
		t.Fatalf("resumed again: workers %v, %+v", j.Workers, j.Dynamic.Progress())
	}
}
