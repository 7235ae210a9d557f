package failover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestOnlyWorkerKilled: a DYNAMIC job served by one worker (a fixed
// count of 1 on 3 nodes) loses it mid-read. The consumer, having no
// worker left for a moment, must not take that for the end of the data:
// the cluster gives the job another worker, which reads what is left.
// Exactly-once delivers every element once; at-most-once loses what the
// dead worker held and counts it. (systemtest/compose found a consumer
// ending after 4 batches with the job still running.)
func TestOnlyWorkerKilled(t *testing.T) {
	for _, delivery := range []string{client.ExactlyOnce, client.AtMostOnce} {
		for _, workers := range []client.Workers{client.FixedWorkers(1), client.AutoWorkers} {
			t.Run(delivery+"/workers-"+string(workers), func(t *testing.T) {
				c := testcluster.Start(t, 3)
				cl := jobtest.Dial(t, c, 0)
				const n = 600
				// Another autoscaling job first, so that this one's worker is
				// likely not node 0 (the first node, often the leader): the
				// case seen was a worker that was neither.
				hog, err := cl.Distribute(context.Background(), jobtest.SlowSpec(100000, 10, 8, 800),
					client.JobOptions{Name: "hog-" + delivery + string(workers), Sharding: client.Dynamic, Delivery: delivery, Offload: client.OffloadRemote, Workers: client.AutoWorkers})
				if err != nil {
					t.Fatal(err)
				}
				defer hog.Close()
				if _, err := hog.Next(context.Background()); err != nil {
					t.Fatal(err)
				}
				it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(n, 10, 8, 800),
					client.JobOptions{Name: "only-" + delivery + string(workers), Sharding: client.Dynamic, Delivery: delivery, Offload: client.OffloadRemote, Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				defer it.Close()
				defer jobtest.DumpJobOnFailure(t, c, "only-"+delivery+string(workers), it)
				victim := -1
				l, _ := c.WaitLeader(t, 10*time.Second)
				d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
					if victim < 0 && it.Stats().Batches >= 4 {
						victim = c.Index(b.Worker)
						if victim < 0 {
							t.Fatalf("batch from %q, not a node", b.Worker)
						}
						c.Kill(victim)
					}
				})
				if victim < 0 {
					t.Fatal("the job ended before the kill")
				}
				st := it.Stats()
				t.Logf("killed the only worker %s (leader %s); %d batches from %v; lost %d (counted %v)", c.Name(victim), c.Name(l), d.Batches, jobtest.Keys(d.ByWorker), st.ElementsLost, st.LossCounted)
				if delivery == client.ExactlyOnce {
					jobtest.CheckExactly(t, d, n, 1)
					return
				}
				var missing int64
				for v := int64(0); v < n; v++ {
					if d.Counts[v] > 1 {
						t.Fatalf("element %d delivered %d times", v, d.Counts[v])
					}
					missing += int64(1 - d.Counts[v])
				}
				if !st.LossCounted || st.ElementsLost != missing {
					t.Fatal(fmt.Sprintf("%d elements missing, %d reported lost (counted %v)", missing, st.ElementsLost, st.LossCounted))
				}
				if len(d.ByWorker) < 2 {
					t.Fatalf("read from %v only: no worker replaced the dead one", jobtest.Keys(d.ByWorker))
				}
			})
		}
	}
}
