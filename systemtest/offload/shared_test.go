package offload

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// sharedCPUs are the emulated CPUs of one host, which the in-process
// nodes and the client's local worker share (test_shared_cpu_cost): an
// element holds one for 4 ms. Two of them: 500 elements a second
// however many goroutines ask, as two cores shared by nodes running on
// the trainer's host. (At 1 ms, 2,000 a second, a loaded CI machine's
// real CPU bound the host's side before the emulated CPUs did, and the
// nodes and the host together did outrun either alone: auto rightly kept
// a fraction, and the test failed.)
var sharedCPUs = make(chan struct{}, 2)

func init() {
	fn.RegisterMapFactory("test_shared_cpu_cost", func(fn.Args) (fn.MapFn, error) {
		return func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
			sharedCPUs <- struct{}{}
			time.Sleep(4 * time.Millisecond) // the element's work on the CPU it holds
			<-sharedCPUs
			return e, nil
		}, nil
	})
}

// TestOffloadAutoSharedCPUs (issue 42): nodes that share the trainer's
// host's CPUs (two emulated CPUs for three nodes and the local worker).
// Offload auto profiles the host alone (500 elements a second), turns
// the nodes on, and predicts the sum of the two sides; both together make
// no more than either alone, more than AutoMissMargin under the
// prediction, so auto checks the nodes alone, finds them as fast, retires
// the local worker and reads the rest from the nodes, every element
// exactly once. Where the nodes have time of their own (the plain cost
// map: nothing shared), the same job keeps its local worker beside them.
func TestOffloadAutoSharedCPUs(t *testing.T) {
	c := testcluster.Start(t, 3)
	ctx := context.Background()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadColocation: client.OffloadColocationIgnore, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Each node runs the map 2 at a time: the nodes alone keep the
	// emulated CPUs busy, as nodes running on the host keep its cores.
	spec := func(n int64, fnName string, args fn.Args) *pipeline.Spec {
		s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 10}})
		s.Map(fnName, args, 2)
		s.Batch(10, false)
		return s
	}
	t.Run("shared", func(t *testing.T) {
		const n = 8000
		it, err := cl.Distribute(ctx, spec(n, "test_shared_cpu_cost", nil), client.JobOptions{Name: "auto-shared", Sharding: client.Dynamic, LocalCPUs: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		d := jobtest.Drain(t, it, 120*time.Second, nil)
		jobtest.CheckExactly(t, d, n, 1)
		st := it.Stats().Offload
		t.Logf("%s: %s", st.Mode, st.Reason)
		if st.Mode != client.OffloadRemote || !strings.Contains(st.Reason, "checked") || st.RemoteBatches == 0 {
			t.Fatalf("auto on nodes sharing the host's CPUs: %+v; want remote after the check", *st)
		}
	})
	t.Run("own", func(t *testing.T) {
		const n = 12000
		it, err := cl.Distribute(ctx, spec(n, "cost", fn.Args{"sleep_us": 4000}), client.JobOptions{Name: "auto-own", Sharding: client.Dynamic, LocalCPUs: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		d := jobtest.Drain(t, it, 120*time.Second, nil)
		jobtest.CheckExactly(t, d, n, 1)
		st := it.Stats().Offload
		t.Logf("%s: %s", st.Mode, st.Reason)
		if st.Mode == client.OffloadRemote || st.Mode == client.OffloadLocal || st.LocalBatches == 0 || st.RemoteBatches == 0 {
			t.Fatalf("auto on nodes with time of their own: %+v; want a share on both sides", *st)
		}
	})
}

// TestOffloadAutoColocatedNodes (issue 42): the in-process nodes listen on
// loopback, this host's own address: with the default
// Options.OffloadColocation, offload auto runs remote from the start (no
// profiling, no local batch), says why in one reason, and reads every
// element once. With "ignore" the same job profiles on the host first.
func TestOffloadAutoColocatedNodes(t *testing.T) {
	c := testcluster.Start(t, 3)
	ctx := context.Background()
	fast := transport.FastConfig()
	for _, colocation := range []string{"", client.OffloadColocationIgnore} {
		cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadColocation: colocation})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		const n = 3000
		s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 10}})
		s.Map("cost", fn.Args{"sleep_us": 1000}, 2)
		s.Batch(10, false)
		it, err := cl.Distribute(ctx, s, client.JobOptions{Name: "auto-colocated-" + colocation, Sharding: client.Dynamic, LocalCPUs: 2})
		if err != nil {
			t.Fatal(err)
		}
		d := jobtest.Drain(t, it, 120*time.Second, nil)
		jobtest.CheckExactly(t, d, n, 1)
		st := it.Stats().Offload
		it.Close()
		t.Logf("colocation %q: %s: %s", colocation, st.Mode, st.Reason)
		colocated := strings.Contains(st.Reason, "all run on this host")
		switch {
		case colocation == "" && (st.Mode != client.OffloadRemote || !colocated || st.LocalBatches != 0):
			t.Errorf("default colocation: %+v; want remote from the start, no local batch", *st)
		case colocation != "" && (colocated || st.LocalBatches == 0):
			t.Errorf("colocation ignore: %+v; want auto's profile on the host (local batches)", *st)
		}
	}
}
