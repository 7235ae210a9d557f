package plan

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// The planner tests set the replicated state up through its commands, as
// the leader's would be; these helpers are the state machine tests' own
// (internal/fsm), for the planner's side.

// at returns c stamped with the proposer time at.
func at(c fsm.Command, t int64) fsm.Command {
	c.At = t
	return c
}

// assignV1 is AssignTask as version 1 wrote it, in logs older than the
// rule that an expired worker is out of its jobs for good.
func assignV1(job, worker string) fsm.Command {
	c := fsm.NewAssignTask(job, worker)
	c.Version = 1
	return c
}

// mustApply applies c through encode/decode, as the FSM does, and fails on
// error.
func mustApply(t *testing.T, s *fsm.State, c fsm.Command) any {
	t.Helper()
	data, err := fsm.EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.ApplyEntry(data)
	if err != nil {
		t.Fatalf("apply %v: %v", c.Type, err)
	}
	return v
}

// applyOK is mustApply.
func applyOK(t *testing.T, s *fsm.State, c fsm.Command) any {
	t.Helper()
	return mustApply(t, s, c)
}

// applyErr applies c, wants an error matching want, and checks the state
// is unchanged.
func applyErr(t *testing.T, s *fsm.State, c fsm.Command, want error) error {
	t.Helper()
	before := s.Clone()
	data, err := fsm.EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyEntry(data)
	if err == nil || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("%v: err = %v, want %v", c.Type, err, want)
	}
	if !reflect.DeepEqual(s, before) {
		t.Fatalf("%v: state changed on error %v", c.Type, err)
	}
	return err
}

var testDataset = fsm.Dataset{Fingerprint: "fp1", Spec: []byte("spec-1"), NumSplits: 40}

// newJobState returns a state with testDataset and, if o is not nil, job
// "j1" over it.
func newJobState(t *testing.T, o *fsm.JobOptions, static ...string) *fsm.State {
	t.Helper()
	s := fsm.NewState()
	applyOK(t, s, fsm.NewRegisterDataset(testDataset))
	if o != nil {
		applyOK(t, s, at(fsm.LegacyCreateJob("j1", "fp1", *o, static), 1000))
	}
	return s
}

// eoOpts is an exactly-once DYNAMIC job of two epochs: one that resumes.
var eoOpts = fsm.JobOptions{Sharding: splits.Dynamic, Epochs: 2, Delivery: fsm.DeliveryExactlyOnce}

// resume is NewResumeJob of job name over testDataset, a second before
// planNow.
func resume(name string, from uint64, part string, want int, p ranges.Delivered) fsm.Command {
	return at(fsm.LegacyResumeJob(name, "fp1", eoOpts, fsm.ResumeBody{From: from, Part: part, Want: want, Delivered: p}), ago(time.Second))
}

// snapshotRoundTrip and resumeParts are fsm's test helpers of that name.

// snapshotRoundTrip checks that s survives a snapshot: the restored
// state encodes to the same bytes, shows the same progress, and goes on
// the same way. (Not reflect.DeepEqual: a resume's consumed checkpoint
// maps are empty in the live state, nil once restored; both encode alike.)
// It returns the restored state.
func snapshotRoundTrip(t *testing.T, s *fsm.State) *fsm.State {
	t.Helper()
	b, err := s.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	r, err := fsm.UnmarshalSnapshot(b)
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

func resumeParts(j *fsm.Job) []string {
	if j.Dynamic.Resume == nil {
		return nil
	}
	return j.Dynamic.Resume.Parts
}
