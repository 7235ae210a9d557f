package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
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
	cl := dial(t, c, 3)
	const n = 4000
	it, err := cl.Distribute(context.Background(), slowSpec(n, 10, 10, 300),
		client.JobOptions{Name: "failover", Sharding: client.Dynamic, ConsumerTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	killed := false
	d := drain(t, it, 60*time.Second, func(b client.Batch) {
		if !killed && it.Stats().Batches >= 50 {
			killed = true
			c.Kill(3)
		}
	})
	if !killed {
		t.Fatal("the job ended before the kill")
	}
	checkExactly(t, d, n, 1)
	// The consumer is still attached through another node: its lease was
	// renewed after the kill.
	_, leader := c.Leader()
	view, ok := leader.Raft().Job("failover")
	if !ok || len(view.Consumers) != 1 {
		t.Fatalf("job after failover: found=%v consumers=%v", ok, view.Consumers)
	}
}
