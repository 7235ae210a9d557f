package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// Several streams per worker (over several QUIC connections) still give
// every element exactly once, for DYNAMIC and OFF.
func TestStreamsPerWorker(t *testing.T) {
	c := testcluster.Start(t, 3)
	fast := transport.FastConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, StreamsPerWorker: 3, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		sh    client.Sharding
		times int
	}{{client.Dynamic, 1}, {client.Off, 3}} {
		it, err := cl.Distribute(context.Background(), jobtest.RangeSpec(3000, 20, 8), client.JobOptions{Name: "streams-" + string(tc.sh), Sharding: tc.sh, Workers: client.AllWorkers, Offload: client.OffloadRemote})
		if err != nil {
			t.Fatal(err)
		}
		d := jobtest.Drain(t, it, 60*time.Second, nil)
		it.Close()
		jobtest.CheckExactly(t, d, 3000, tc.times)
	}
}
