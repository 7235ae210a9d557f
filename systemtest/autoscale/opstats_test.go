package autoscale

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// A running job's workers report their per-op statistics, and a map with
// parallelism auto is tuned on the workers while the job runs: its live
// parallelism rises above 1 within the node's core budget.
func TestJobOpStatsAndAutotune(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Stop: 100_000_000, SplitSize: 200}}).
		Map("cost", map[string]any{"sleep_us": 2000}, pipeline.ParallelismAuto).
		Batch(8, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "tuned", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	peak := 0
	for deadline := time.Now().Add(time.Minute); peak < 2; {
		for i := 0; i < 10; i++ {
			if _, err := it.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		st, err := cl.JobOpStats(ctx, "tuned")
		if err != nil {
			t.Fatal(err)
		}
		if st.Spec == nil || st.Job.Name != "tuned" || len(st.Workers) == 0 {
			t.Fatalf("op stats: spec %v, job %q, %d workers", st.Spec != nil, st.Job.Name, len(st.Workers))
		}
		for _, w := range st.Workers {
			if len(w.Ops) != 3 || w.Cores < 1 {
				t.Fatalf("worker %s: %d ops, %d cores", w.Worker, len(w.Ops), w.Cores)
			}
			peak = max(peak, w.Ops[1].Parallelism)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the auto map's parallelism stayed at %d for a minute", peak)
		}
	}
	// The consumer's heartbeats carry its training loop's figures to the
	// job.
	c.WaitFor(t, 30*time.Second, "the consumer's metrics in the job", func() bool {
		jobs, err := cl.Jobs(ctx)
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.Name != "tuned" || len(j.Consumers) != 1 {
				continue
			}
			if m, ok := j.ConsumerMetrics[j.Consumers[0]]; ok {
				return m.Batches > 0 && m.BatchTimeSeconds > 0 && m.Stall >= 0 && m.Stall <= 1
			}
		}
		return false
	})
	if _, err := cl.JobOpStats(ctx, "no-such-job"); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("an unknown job: %v, want not found", err)
	}
}
