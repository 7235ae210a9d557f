package failover

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestRollingRestartExactlyOnce (issue 14, item 3): every node of a
// 5-node cluster is stopped gracefully and started again from its data
// dir, one after the other, while a DYNAMIC job (exactly-once, the
// default) is read: nothing is lost, nothing repeats. Here the drains are
// cut short: the stops run inside the reading loop, so the consumer reads
// nothing while a node drains, and DrainTimeout (200 ms) ends each drain
// before its queue is read; what the node held is read again elsewhere.
// TestRollingRestartDrains has the drains complete.
func TestRollingRestartExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts 5 nodes one by one")
	}
	c := testcluster.Start(t, 5, testcluster.WithVoters(3),
		testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.DrainTimeout = 200 * time.Millisecond }))
	const n = 20000
	// The client dials every node: whichever it is using is restarted too.
	cl := jobtest.Dial(t, c, 0)
	it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 50, 10, 200),
		client.JobOptions{Name: "rolling", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	defer jobtest.DumpJobOnFailure(t, c, "rolling", it)
	next := 0
	d := jobtest.Drain(t, it, 180*time.Second, func(b client.Batch) {
		// One node every 100 batches (about a second), from batch 100.
		if next < 5 && it.Stats().Batches >= int64(100*(next+1)) {
			i := next
			next++
			if err := c.Stop(i); err != nil {
				t.Errorf("stop %s: %v", c.Name(i), err)
			}
			if err := c.Restart(i); err != nil {
				t.Fatalf("restart %s: %v", c.Name(i), err)
			}
			c.WaitFor(t, 30*time.Second, c.Name(i)+" back in the cluster", func() bool { return jobtest.Alive(c, i) })
		}
	})
	if next < 5 {
		t.Fatalf("the job ended after %d of 5 restarts", next)
	}
	jobtest.CheckExactly(t, d, n, 1)
	st := it.Stats()
	t.Logf("%d batches, 5 nodes restarted one by one; exactly-once counters %+v; reconnects %d", d.Batches, st.Exact, st.Reconnects)
}
