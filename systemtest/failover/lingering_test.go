package failover

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// A heartbeat that the iterator had in flight when it closed can reach the
// leader after the iterator's Detach: Close cancels the heartbeat's call on
// the client's side only, and the node goes on with it. That late
// AttachConsumer must not attach the consumer again, or the job (and its
// tasks on every worker) lives on for the consumer's whole ConsumerTTL
// (30 s by default) instead of GCAfter. Seen as tasks still running on 8
// workers 10 s after their only client had closed (bench fanin); here the
// late heartbeat is sent on purpose, after Close, so the order is certain.
func TestLateHeartbeatDoesNotKeepClosedJobAlive(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const gcAfter = 300 * time.Millisecond
	// ConsumerTTL is left at its default (30 s): the lease a revived
	// consumer would hold.
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(100000, 100, 10, 100), client.JobOptions{Name: "late-beat", Sharding: client.Off, GCAfter: gcAfter})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(ctx); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 10*time.Second, "a task of the job on every node", func() bool {
		for _, i := range c.Running() {
			if len(c.Node(i).Tasks()) == 0 {
				return false
			}
		}
		return true
	})
	_, leader := c.Leader()
	if leader == nil {
		t.Fatal("no single leader")
	}
	v, ok := leader.Raft().Job("late-beat")
	if !ok || len(v.Consumers) != 1 {
		t.Fatalf("job before Close: found %v, consumers %v", ok, v.Consumers)
	}
	consumer := v.ConsumerIDs()[0]
	if err := it.Close(); err != nil {
		t.Fatalf("Close (detach): %v", err)
	}

	// The iterator's last heartbeat, arriving after its Detach.
	beatErr := jobtest.RawCall(t, c.Node(1).Addr(), api.MethodHeartbeat, api.JobRequest{Job: "late-beat", Consumer: consumer})
	t.Logf("late heartbeat answered: %v", beatErr)

	closed := time.Now()
	// GCAfter, plus the leader's reconcile tick and the workers' job poll
	// (100 and 200 ms with mesh.FastConfig), plus room for a slow machine;
	// far below the 30 s a revived consumer holds the job for.
	c.WaitFor(t, gcAfter+5*time.Second, "the job to be garbage-collected", func() bool {
		_, leader := c.Leader()
		if leader == nil {
			return false
		}
		_, ok := leader.Raft().Job("late-beat")
		return !ok
	})
	waitNoTasks(t, c, 5*time.Second)
	t.Logf("job collected and tasks stopped %v after the late heartbeat", time.Since(closed).Round(time.Millisecond))
}
