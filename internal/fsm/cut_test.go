package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// TestCreateJobOffloadBoundary: a job's cut (JobOptions.OffloadBoundary)
// needs CreateJob v4 and exactly-once delivery without coordinated
// reads; it is stored, survives a snapshot, and a consumer asking for
// another cut is refused with the difference named.
func TestCreateJobOffloadBoundary(t *testing.T) {
	s := NewState()
	applyOK(t, s, NewRegisterDataset(testDataset))
	o := JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce, OffloadBoundary: 2, ConsumerTTL: 1e12, GCAfter: 1e12}
	c := LegacyCreateJob("cut", "fp1", o, nil)
	if c.Version != 4 {
		t.Fatalf("CreateJob with a cut is v%d, want v4", c.Version)
	}
	if c := LegacyCreateJobAt("cut", "fp1", o, nil, &ScaleStart{Workers: 2, From: "x"}); c.Version != 4 {
		t.Fatalf("CreateJob with a cut and a scale start is v%d, want v4", c.Version)
	}
	v3 := c
	v3.Version = 3
	applyErr(t, s, at(v3, 1000), ErrInvalidCommand)
	applyOK(t, s, at(c, 1000))
	if got := s.Jobs["cut"].Options.OffloadBoundary(); got != 2 {
		t.Fatalf("stored offload_boundary %d", got)
	}
	if got := snapshotRoundTrip(t, s).Jobs["cut"].Options.OffloadBoundary(); got != 2 {
		t.Fatalf("offload_boundary after a snapshot: %d", got)
	}
	other := o
	other.OffloadBoundary = 3
	err := applyErr(t, s, at(LegacyCreateJob("cut", "fp1", other, nil), 2000), ErrMismatch)
	if err == nil || !strings.Contains(err.Error(), "offload_boundary=2, not 3") {
		t.Errorf("another cut: %v", err)
	}

	for _, tc := range []struct {
		name string
		edit func(*JobOptions)
		want string
	}{
		{"at-most-once", func(o *JobOptions) { o.Delivery = "" }, "offload_boundary needs delivery exactly-once"},
		{"coordinated", func(o *JobOptions) { o.Coordinated = true }, "offload_boundary needs delivery exactly-once without coordinated reads"},
		{"negative", func(o *JobOptions) { o.OffloadBoundary = -1 }, "offload_boundary -1"},
		{"too-far", func(o *JobOptions) { o.OffloadBoundary = jobspec.MaxOffloadBoundary + 1 }, "offload_boundary 1025"},
	} {
		x := o
		tc.edit(&x)
		err := x.Normalized().validate()
		if err == nil || !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
