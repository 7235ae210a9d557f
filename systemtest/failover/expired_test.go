package failover

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// A worker cut off long enough to be declared dead, then back: the job
// expired it (its leases are lost) and it must end its part cleanly, not
// fail the job for every consumer; nothing is delivered twice.
func TestWorkerExpiredWhileAliveEndsCleanly(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n, splitSize = 6000, 20
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(n, splitSize, 10, 300),
		client.JobOptions{Name: "blip", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	victim := c.Name(2)
	cut := false
	d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
		if cut || it.Stats().Batches < 40 {
			return
		}
		cut = true
		c.Partition([]int{0, 1}, []int{2})
		_, leader := c.Leader()
		c.WaitFor(t, 10*time.Second, "the cut-off worker to be expired", func() bool {
			if _, leader = c.Leader(); leader == nil {
				return false
			}
			v, ok := leader.Raft().Job("blip")
			return ok && v.Workers[victim].Expired
		})
		c.Heal()
	})
	if !cut {
		t.Fatal("the job ended before the cut")
	}
	for v, k := range d.Counts {
		if k != 1 || v < 0 || v >= n {
			t.Fatalf("element %d delivered %d times", v, k)
		}
	}
	t.Logf("delivered %d of %d after %s was expired while alive", len(d.Counts), n, victim)
}
