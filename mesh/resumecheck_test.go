package mesh_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestBadCheckpointKeepsTheJob: a resume whose checkpoint the state
// machine would refuse (no consumer count; a delivered set out of the
// dataset's range) is refused before it is proposed, so the running job
// it names is not replaced (the state machine removes the old job before
// it checks the checkpoint, and keeps doing so to replay old logs alike).
func TestBadCheckpointKeepsTheJob(t *testing.T) {
	c := testcluster.Start(t, 1)
	_, n := c.WaitLeader(t, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: 1, SplitSize: 10})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	opts := api.JobOptions{Name: "kept", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	first, err := n.Distribute(ctx, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Detach(ctx, "kept", "c0"); err != nil { // its consumer stopped: a resume may replace it
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		part api.ResumePart
		want string
	}{
		{"no consumer count", api.ResumePart{From: first.ID, Part: "c0", Want: 0}, "1 to"},
		{"a split beyond the dataset", api.ResumePart{From: first.ID, Part: "c0", Want: 1,
			Delivered: ranges.Delivered{Returned: map[int64]map[int64]ranges.Set{0: {99: {0, 1}}}}}, "split 99"},
	} {
		_, err := n.Distribute(ctx, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c1", Resume: &tc.part})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: resume answered %v, want a refusal naming %q", tc.name, err, tc.want)
		}
		got, err := n.JobGet(ctx, "kept")
		if err != nil || got.Job.ID != first.ID {
			t.Fatalf("%s: after the refused resume the job is %+v (err %v), want job id %d still there", tc.name, got.Job, err, first.ID)
		}
	}
}
