package fsm

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// eoOpts is an exactly-once DYNAMIC job of two epochs: one that resumes.
var eoOpts = JobOptions{Sharding: splits.Dynamic, Epochs: 2, Delivery: DeliveryExactlyOnce}

// resume is NewResumeJob of job name over testDataset, a second before
// planNow.
func resume(name string, from uint64, part string, want int, p ranges.Delivered) Command {
	return at(LegacyResumeJob(name, "fp1", eoOpts, ResumeBody{From: from, Part: part, Want: want, Delivered: p}), ago(time.Second))
}

// snapshotRoundTrip checks that s survives a snapshot: the restored
// state encodes to the same bytes, shows the same progress, and goes on
// the same way. (Not reflect.DeepEqual: a resume's consumed checkpoint
// maps are empty in the live state, nil once restored; both encode alike.)
// It returns the restored state.
func snapshotRoundTrip(t *testing.T, s *State) *State {
	t.Helper()
	b, err := s.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	r, err := UnmarshalSnapshot(b)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	b2, err := r.MarshalSnapshot()
	if err != nil || !slices.Equal(b, b2) {
		t.Fatalf("the restored state encodes differently (%v)", err)
	}
	for name, j := range s.Jobs {
		rj := r.Jobs[name]
		if rj == nil || rj.ID != j.ID || (j.Dynamic == nil) != (rj.Dynamic == nil) {
			t.Fatalf("job %q after a snapshot: %+v", name, rj)
		}
		if j.Dynamic == nil {
			continue
		}
		if p, rp := j.Dynamic.Progress(), rj.Dynamic.Progress(); !reflect.DeepEqual(p, rp) || !reflect.DeepEqual(resumeParts(j), resumeParts(rj)) {
			t.Fatalf("job %q after a snapshot: progress %+v %+v, want %+v %+v", name, rp, rp.Exact, p, p.Exact)
		}
		// Both go on alike: the same leases, to the end.
		a, c := j.Dynamic.Clone(), rj.Dynamic.Clone()
		for i := range 200 {
			la, lc := a.Lease("snap", uint64(1000+i), 7), c.Lease("snap", uint64(1000+i), 7)
			if !reflect.DeepEqual(la, lc) {
				t.Fatalf("job %q after a snapshot leases %+v, the live state %+v", name, lc, la)
			}
			if la.Done || a.Waiting() {
				break
			}
		}
		if !reflect.DeepEqual(a.Progress(), c.Progress()) {
			t.Fatalf("job %q after a snapshot: progress differs once leased out", name)
		}
	}
	return r
}

func resumeParts(j *Job) []string {
	if j.Dynamic.Resume == nil {
		return nil
	}
	return j.Dynamic.Resume.Parts
}

// TestResumeReplacesJob: a resume replaces a job with no consumer
// attached by a new one (a new ID); tasks of the old job are refused;
// with consumers attached it is ErrJobInUse.
func TestResumeReplacesJob(t *testing.T) {
	s := newJobState(t, nil)
	old := applyOK(t, s, at(LegacyCreateJob("j1", "fp1", eoOpts, nil), ago(time.Second))).(uint64)
	applyOK(t, s, at(NewAttachConsumer("j1", "c1"), ago(time.Second)))
	applyOK(t, s, at(NewAttachConsumer("j1", "c2"), ago(time.Second)))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	if l := applyOK(t, s, NewLeaseSplitsOfJob("j1", old, "w1", 0, 1, 3)).(splits.Lease); len(l.Splits) != 3 {
		t.Fatalf("lease %+v", l)
	}
	part := ranges.Delivered{DoneBefore: 1, Missing: map[int64]map[int64]ranges.Set{0: {1: ranges.Span(2, 4)}}}
	err := applyErr(t, s, resume("j1", old, "c1", 2, part), ErrJobInUse)
	if !strings.Contains(err.Error(), "2 consumer(s) attached") {
		t.Fatalf("message %q does not name the consumers", err)
	}
	applyOK(t, s, NewDetachConsumer("j1", "c1"))
	applyErr(t, s, resume("j1", old, "c1", 2, part), ErrJobInUse)
	later := planNow.Add(maxConsumerTTL).UnixNano()
	applyOK(t, s, at(NewExpireConsumers(later), later)) // c2's lease ran out

	// Options or dataset that differ are a mismatch, not a replacement.
	other := eoOpts
	other.Epochs = 3
	applyErr(t, s, at(LegacyResumeJob("j1", "fp1", other, ResumeBody{From: old, Part: "c1", Want: 1, Delivered: part}), ago(time.Second)), ErrMismatch)

	idx := s.Index + 1
	id := applyOK(t, s, resume("j1", old, "c1", 1, part)).(uint64)
	if id != idx || id == old {
		t.Fatalf("resumed id %d (old %d), want %d", id, old, idx)
	}
	j := s.Jobs["j1"]
	if j.Dynamic.Waiting() || j.Dynamic.Resume.From != old || len(j.Workers) != 0 || len(j.Consumers) != 0 || j.Dynamic.Total.Leased != 0 {
		t.Fatalf("resumed job: workers %v consumers %v %+v", j.Workers, j.Consumers, j.Dynamic.Progress())
	}

	// w1 joins the new job; its old task's requests are refused.
	applyOK(t, s, NewAssignTask("j1", "w1"))
	err = applyErr(t, s, NewLeaseSplitsOfJob("j1", old, "w1", 0, 1, 3), ErrNotAssigned)
	if !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("stale lease: %v", err)
	}
	l := applyOK(t, s, NewLeaseSplitsOfJob("j1", id, "w1", 0, 2, 3)).(splits.Lease)
	// Split 0 of epoch 0 is skipped; split 1 excludes all but 2 and 3.
	if l.Epoch != 0 || !slices.Equal(l.Splits, []int64{1}) || len(l.Exclude) != 1 || !slices.Equal(l.Exclude[0], ranges.Set{0, 2, 4, splits.ResumeEnd}) {
		t.Fatalf("lease %+v", l)
	}
	if p := s.Jobs["j1"].Dynamic.Progress(); p.Exact.Skipped != testDataset.NumSplits-1 || p.Epoch != 1 {
		t.Fatalf("progress %+v %+v", p, p.Exact)
	}
	produce := []ranges.SplitEmitted{{Split: 1, Emitted: ranges.Span(2, 4)}}
	applyErr(t, s, NewProduceSplitsOfJob("j1", old, "w1", 0, produce), ErrNotAssigned)
	applyErr(t, s, NewEndTaskOfJob("j1", old, "w1", "boom"), ErrNotAssigned)
	applyErr(t, s, NewEndTaskOfJob("j1", old, "w1", ""), ErrNotAssigned)
	if s.Jobs["j1"].Failure != nil {
		t.Fatal("a stale task failed the job")
	}
	applyOK(t, s, NewProduceSplitsOfJob("j1", id, "w1", 0, produce))
	applyOK(t, s, NewProduceSplitsOfJob("j1", 0, "w1", 0, nil)) // 0: unchecked
	if changed := applyOK(t, s, NewEndTaskOfJob("j1", id, "w1", "")); changed != true {
		t.Fatalf("end task: %v", changed)
	}
	snapshotRoundTrip(t, s)
}

// TestResumeRefused: only exactly-once DYNAMIC jobs without share or
// coordinated reads resume; a checkpoint that does not fit the job is
// refused; nothing changes.
func TestResumeRefused(t *testing.T) {
	s := newJobState(t, nil)
	body := ResumeBody{From: 1, Part: "a", Want: 1}
	for _, o := range []JobOptions{
		{Sharding: splits.Dynamic, Epochs: 2},
		{Sharding: splits.Dynamic, Epochs: 2, Share: true},
		{Sharding: splits.Dynamic, Epochs: 2, Coordinated: true, NumConsumers: 2},
		{Sharding: splits.Off, Epochs: 2},
	} {
		err := applyErr(t, s, LegacyResumeJob("j1", "fp1", o, body), ErrInvalidCommand)
		if !strings.Contains(err.Error(), "resume from checkpoints") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// Invalid options are refused as such.
	applyErr(t, s, LegacyResumeJob("j1", "fp1", JobOptions{Sharding: splits.Dynamic, Share: true, Delivery: DeliveryExactlyOnce}, body), ErrInvalidCommand)
	// An existing job of another kind: a mismatch.
	applyOK(t, s, LegacyCreateJob("plain", "fp1", JobOptions{Sharding: splits.Dynamic, Epochs: 2}, nil))
	applyErr(t, s, LegacyResumeJob("plain", "fp1", eoOpts, body), ErrMismatch)
	// Checkpoints that do not fit.
	for _, b := range []ResumeBody{
		{From: 1, Part: "a", Want: 0},
		{From: 1, Part: "a", Want: jobspec.MaxResumeParts + 1},
		{From: 1, Part: "a", Want: 1, Delivered: ranges.Delivered{DoneBefore: 3}},
		{From: 1, Part: "a", Want: 1, Delivered: ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {0: {4, 2}}}}},
	} {
		applyErr(t, s, LegacyResumeJob("j1", "fp1", eoOpts, b), ErrInvalidCommand)
	}
	applyErr(t, s, LegacyResumeJob("j1", "nope", eoOpts, body), ErrUnknownDataset)
	// A job that runs forever: epochs before DoneBefore are skipped one
	// by one inside a lease, so DoneBefore is bounded.
	forever := eoOpts
	forever.Epochs = -1
	applyErr(t, s, LegacyResumeJob("j1", "fp1", forever, ResumeBody{From: 1, Part: "a", Want: 1, Delivered: ranges.Delivered{DoneBefore: 1 << 40}}), ErrInvalidCommand)
	applyOK(t, s, LegacyResumeJob("j1", "fp1", forever, ResumeBody{From: 1, Part: "a", Want: 1, Delivered: ranges.Delivered{DoneBefore: 3}}))
	applyOK(t, s, NewAssignTask("j1", "w1"))
	if l := applyOK(t, s, NewLeaseSplits("j1", "w1", 1, 1)).(splits.Lease); l.Epoch != 3 || !slices.Equal(l.Splits, []int64{0}) {
		t.Fatalf("forever job's lease %+v", l)
	}
}

// TestStaleJobIDUnknownJob: a job ID is checked only against a job that
// exists; a task of a job that is gone gets ErrUnknownJob.
func TestStaleJobIDUnknownJob(t *testing.T) {
	s := newJobState(t, nil)
	applyErr(t, s, NewLeaseSplitsOfJob("j1", 5, "w1", 0, 1, 1), ErrUnknownJob)
	applyErr(t, s, NewProduceSplitsOfJob("j1", 5, "w1", 0, nil), ErrUnknownJob)
	applyErr(t, s, NewEndTaskOfJob("j1", 5, "w1", ""), ErrUnknownJob)
}
