package process

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
)

// TestResumeAfterClusterKilled: three real node processes; a consumer
// reads part of a 2-epoch exactly-once job, checkpoints and exits; every
// node process is SIGKILLed and started again from its data dir; a new
// client resumes the job from the checkpoint: what the two read is the
// dataset exactly once per epoch.
func TestResumeAfterClusterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 node processes, twice")
	}
	nodes := startNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const n, epochs = 4000, 2
	spec := func() *pipeline.Spec {
		s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
		s.Shuffle(64, 3)
		s.Cost(0, 100)
		s.Batch(10, false)
		return s
	}
	counts := make([]int, n)
	opts := client.JobOptions{Name: "resume-process", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: epochs}
	cl, _ := dialFormed(t, ctx, nodes, 0)
	it, err := cl.Distribute(ctx, spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	first := readValues(t, ctx, it, counts, 250, nil)
	ck, err := it.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	it.Close()
	cl.Close()
	for _, np := range nodes {
		np.kill()
	}
	for _, np := range nodes {
		np.start(t)
	}
	cl, _ = dialFormed(t, ctx, nodes, 2)
	defer cl.Close()
	opts.Resume = ck
	it, err = cl.Distribute(ctx, spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	rest := readValues(t, ctx, it, counts, 1<<30, nil)
	for v, k := range counts {
		if k != epochs {
			t.Fatalf("element %d delivered %d times, want %d", v, k, epochs)
		}
	}
	t.Logf("%d batches, checkpoint of %d bytes, every process SIGKILLed and restarted, %d batches more: every element once per epoch; %+v",
		first, len(ck), rest, it.Stats().Exact)
}
