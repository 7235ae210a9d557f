package failover

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestServingCountsCurrentWorkers: Stats.Serving (what `feedmesh read
// --progress` shows as "workers") counts the workers serving the job now,
// not every worker that ever delivered (issue 42: "workers 5" with 3
// alive): a killed worker leaves Serving once the cluster expires it, and
// stays in Workers, which lists who delivered.
func TestServingCountsCurrentWorkers(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(30000, 20, 10, 300),
		client.JobOptions{Name: "serving", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := func() {
		t.Helper()
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	for len(it.Stats().Workers) < 3 {
		next()
	}
	if s := it.Stats().Serving; s != 3 {
		t.Fatalf("Serving %d with three live workers delivering", s)
	}
	c.Kill(2)
	deadline := time.Now().Add(30 * time.Second)
	for it.Stats().Serving != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Serving %d 30 s after a worker was killed, want 2", it.Stats().Serving)
		}
		next() // reading on: the heartbeats refresh the job's workers
	}
	if got := len(it.Stats().Workers); got != 3 {
		t.Errorf("Workers lists %d workers, want the 3 that delivered", got)
	}
}
