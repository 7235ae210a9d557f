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

// The node the client dialed dies mid-job: the client's control requests
// (heartbeats) fail over to another node and the job finishes exactly once.
// The dialed node runs no tasks here, so no split dies with it.
func TestClientFailsOverWhenDialedNodeDies(t *testing.T) {
	c := testcluster.Start(t, 4, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.Worker.Disabled = i == 3
	}))
	cl := jobtest.Dial(t, c, 3)
	const n = 4000
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(n, 10, 10, 300),
		client.JobOptions{Name: "failover", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, ConsumerTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	killed := false
	d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
		if !killed && it.Stats().Batches >= 50 {
			killed = true
			c.Kill(3)
		}
	})
	if !killed {
		t.Fatal("the job ended before the kill")
	}
	jobtest.CheckExactly(t, d, n, 1)
	// The consumer is still attached through another node: its lease was
	// renewed after the kill.
	_, leader := c.WaitLeader(t, 10*time.Second)
	view, ok := leader.Raft().Job("failover")
	if !ok || len(view.Consumers) != 1 {
		t.Fatalf("job after failover: found=%v consumers=%v", ok, view.Consumers)
	}
}
