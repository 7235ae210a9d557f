package autoscale

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

// An autoscaling job (Workers auto) under failure: one of its
// workers is killed once it has two, then the leader (which allocates the
// nodes) is killed; the job goes on with the workers left and those the new
// leader gives it, and every element is delivered exactly once. Nodes 0-2
// are control-only voters, 3-5 workers; the client dials node 3 and is
// never killed.
func TestAutoscaleWorkerAndLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker and the leader under a running job")
	}
	c := testcluster.Start(t, 6, testcluster.WithVoters(3), testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.Worker.Disabled = i < 3
	}))
	const client0 = 3
	cl := jobtest.Dial(t, c, client0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 0.5 ms of waiting per element, 4 per batch: a worker makes ~500
	// batches/s, and a consumer that takes them as they come wants more.
	const n = 12_000
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(n, 20, 4, 500), client.JobOptions{Name: "auto-kill", Sharding: client.Dynamic, Workers: client.AutoWorkers, Offload: client.OffloadRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	victim, leader := -1, -1
	var killedAt int64
	d := jobtest.Drain(t, it, 90*time.Second, func(b client.Batch) {
		batches := it.Stats().Batches
		switch {
		case victim < 0 && batches%20 == 0:
			jobs, err := cl.Jobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if j.Name != "auto-kill" {
					continue
				}
				if j.Options.Workers != client.AutoWorkers || j.Scale == nil {
					t.Fatalf("a DYNAMIC job asking for workers auto: workers %q, scale %+v; want auto", j.Options.Workers, j.Scale)
				}
				var active []string
				for _, w := range j.Workers {
					if !w.Expired && !w.Dismissed && !w.Drained {
						active = append(active, w.Name)
					}
				}
				if len(active) < 2 {
					break
				}
				for _, w := range active {
					if i := c.Index(w); i != client0 {
						victim, killedAt = i, batches
						t.Logf("killing worker %s of %v after %d batches", w, active, batches)
						c.Kill(i)
						break
					}
				}
			}
		case victim >= 0 && leader < 0 && batches >= killedAt+300:
			leader, _ = c.WaitLeader(t, 10*time.Second) // none while an election runs
			t.Logf("killing the leader %s after %d batches", c.Name(leader), batches)
			c.Kill(leader)
		}
	})
	if victim < 0 || leader < 0 {
		t.Fatalf("the job ended before both kills (worker %d, leader %d) after %d batches", victim, leader, d.Batches)
	}
	jobtest.CheckExactly(t, d, n, 1)
	// The job had two workers when one died: the allocation gave it the
	// third worker node in its place.
	replaced := false
	for w := range d.ByWorker {
		if i := c.Index(w); i != victim && i != client0 {
			replaced = true
		}
	}
	if !replaced {
		t.Errorf("the dead worker was not replaced: batches from %v", jobtest.Keys(d.ByWorker))
	}
}
