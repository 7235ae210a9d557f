package coordinated

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// A job garbage-collected under a consumer that is still reading ends its
// iteration with an error that says so (the heartbeat is answered "not
// found"), instead of the consumer heartbeating a job that is gone
// forever. The consumer is detached behind its back (as when its lease
// expired during a long pause), so the job has no consumer left and is
// collected after GCAfter. (A plain job's worker usually notices first:
// its split lease fails, and it ends the stream with that error.)
func TestCoordinatedJobCollectedEndsIteration(t *testing.T) {
	c := testcluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	// One round buffered: the consumer is idle, not mid-stream, when the job
	// goes, so its heartbeat is the first to notice.
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 50 * time.Millisecond, PrefetchBatches: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const name = "coord-gone"
	it, err := cl.Distribute(ctx, slowText(3000, 50), client.JobOptions{
		Name: name, Coordinated: true, NumConsumers: 2, ConsumerIndex: 0, GCAfter: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if _, err := it.Next(ctx); err != nil {
		t.Fatal(err)
	}
	_, leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	v, ok := leader.Raft().Job(name)
	if !ok || len(v.Consumers) != 1 {
		t.Fatalf("job: found %v, consumers %v", ok, v.Consumers)
	}
	if err := jobtest.RawCall(t, c.Node(0).Addr(), api.MethodDetach, api.JobRequest{Job: name, Consumer: v.ConsumerIDs()[0]}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := it.Next(ctx)
		if err == nil {
			continue // rounds buffered before the job went
		}
		if !errors.Is(err, transport.ErrNotFound) || !strings.Contains(err.Error(), "no longer exists") {
			t.Fatalf("Next after the job was collected: %v; want an error saying it no longer exists, wrapping transport.ErrNotFound", err)
		}
		t.Logf("Next: %v", err)
		break
	}
	if _, ok := leader.Raft().Job(name); ok {
		t.Fatal("the iteration ended while the job still exists")
	}
}
