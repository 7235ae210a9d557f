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

// No leader for longer than a request waits: every node is cut off from
// the others (no quorum anywhere) for 3 RequestTimeouts while the workers
// run out of leased splits. Their leases fail with no answer and are sent
// again (the same request: its id makes a leader that did commit it answer
// with the same lease); once the cluster heals, the job goes on and ends
// with every element exactly once. Before, the first lease that found no
// leader failed the job.
func TestLeaseRetriedWithoutLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a cluster off for several seconds")
	}
	const requestTimeout = 700 * time.Millisecond
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.RequestTimeout = requestTimeout }))
	cl := jobtest.Dial(t, c, 0)
	const n, splitSize = 3000, 20
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(n, splitSize, 10, 300),
		client.JobOptions{Name: "leaderless", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	cut := false
	d := jobtest.Drain(t, it, 2*time.Minute, func(b client.Batch) {
		if cut || it.Stats().Batches < 30 {
			return
		}
		cut = true
		c.Partition([]int{0}, []int{1}, []int{2})
		// Hold the cut until no node has had a leader for 3 request
		// timeouts: the workers' queued splits run out well before.
		deadline := time.Now().Add(3 * requestTimeout)
		c.WaitFor(t, 30*time.Second, "3 request timeouts without a leader", func() bool {
			if i, _ := c.Leader(); i >= 0 {
				deadline = time.Now().Add(3 * requestTimeout)
			}
			return time.Now().After(deadline)
		})
		c.Heal()
	})
	if !cut {
		t.Fatal("the job ended before the cut")
	}
	jobtest.CheckExactly(t, d, n, 1)
	if st := it.Stats(); st.JobState == "failed" {
		t.Fatalf("the job failed: %s", st.JobFailure)
	}
}
