package delivery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// TestDeadClusterEndsIteration (issue 38 item 2): every node of the
// cluster dies mid-read. Next fails with ErrUnavailable once the cluster
// has said nothing for Options.UnavailableTimeout (it waited for ever
// before), and Close returns at once (it waited RequestTimeout for a last
// receipt report and again for the detach: 20 s by default).
func TestDeadClusterEndsIteration(t *testing.T) {
	c := testcluster.Start(t, 1)
	fast := transport.FastConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const limit = 2 * time.Second
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond,
		RequestTimeout: 2 * time.Second, UnavailableTimeout: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	opts := client.JobOptions{Name: "dead-cluster", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(100000, 100, 10, 1000), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(ctx); err != nil {
		t.Fatal(err)
	}
	c.Kill(0)
	killed := time.Now()
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	for {
		_, err = it.Next(rctx)
		if err != nil {
			break
		}
	}
	took := time.Since(killed)
	if !errors.Is(err, transport.ErrUnavailable) || rctx.Err() != nil {
		t.Fatalf("Next after every node died: %v after %v; want ErrUnavailable after about %v", err, took, limit)
	}
	start := time.Now()
	it.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close after the cluster was found unavailable took %v; want it at once", d)
	}
	t.Logf("Next failed %v after the kill: %v; Close took %v", took.Round(time.Millisecond), err, time.Since(start).Round(time.Millisecond))
}
