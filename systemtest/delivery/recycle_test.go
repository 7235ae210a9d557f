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

// Batches released back to the client are received into again, and every
// element still arrives exactly once with its own value: no buffer is handed
// out while a batch still uses it.
func TestReleaseRecyclesBuffers(t *testing.T) {
	c := testcluster.Start(t, 2)
	fast := transport.FastConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, RecycleBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	it, err := cl.Distribute(context.Background(), jobtest.RangeSpec(60000, 3000, 1000), client.JobOptions{Name: "recycle", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
		b.Release()
		b.Release() // twice, and on a copy: no effect
		c := b
		c.Release()
	})
	it.Close()
	jobtest.CheckExactly(t, d, 60000, 1)
	st := cl.BufferStats()
	t.Logf("%d batches, buffer stats %+v", d.Batches, st)
	if st.Reused < int64(d.Batches)/2 || st.HeldBytes > 4<<20 {
		t.Fatalf("%d of %d batches reused a buffer, %d bytes held (bound 4 MiB)", st.Reused, d.Batches, st.HeldBytes)
	}

	off, err := client.Dial(ctx, c.Node(1).Addr(), client.Options{Transport: &fast, RecycleBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if st := off.BufferStats(); st != (client.BufferStats{}) {
		t.Fatalf("recycling off, stats %+v", st)
	}
}
