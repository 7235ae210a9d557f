package failover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// Test 2: a worker killed mid-epoch: nothing twice, nothing foreign, and
// what is missing belongs to splits only the dead worker could have held.
func TestDynamicWorkerKilledMidEpoch(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n, splitSize = 6000, 20
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(n, splitSize, 10, 300),
		client.JobOptions{Name: "kill-worker", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	victim := 2 // the client dialed node 0
	victimName := c.Name(victim)
	killed := false
	d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
		if !killed && it.Stats().Batches >= 60 {
			killed = true
			c.Kill(victim)
		}
	})
	if !killed {
		t.Fatal("the job ended before the kill")
	}
	for v, k := range d.Counts {
		if k != 1 {
			t.Fatalf("element %d delivered %d times", v, k)
		}
		if v < 0 || v >= n {
			t.Fatalf("element %d is not in the dataset", v)
		}
	}
	survivorSplit := map[int64]bool{}
	for w, vs := range d.ByWorker {
		if w == victimName {
			continue
		}
		for _, v := range vs {
			survivorSplit[v/splitSize] = true
		}
	}
	missing := 0
	for v := int64(0); v < n; v++ {
		if d.Counts[v] == 0 {
			missing++
			if survivorSplit[v/splitSize] {
				t.Fatalf("element %d is missing but its split %d was served by a surviving worker", v, v/splitSize)
			}
		}
	}
	_, leader := c.WaitLeader(t, 10*time.Second)
	view, ok := leader.Raft().Job("kill-worker")
	if !ok {
		t.Fatal("job gone")
	}
	lost := view.Progress.Total.Lost
	if int64(missing) > lost*splitSize {
		t.Fatalf("%d elements missing, but only %d splits (%d elements) were lost", missing, lost, lost*splitSize)
	}
	if !view.Workers[victimName].Expired {
		t.Fatalf("killed worker %s not expired: %+v", victimName, view.Workers)
	}
	t.Logf("delivered %d of %d; %d missing in %d lost splits", len(d.Counts), n, missing, lost)
}

// Test 3: the leader dies mid-job; workers (which are not Raft voters
// here) keep leasing from the new leader; exactly once.
func TestLeaderKilledMidJob(t *testing.T) {
	c := testcluster.Start(t, 5, testcluster.WithVoters(3), testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.Worker.Disabled = i < 3 // the three voters only coordinate
	}))
	cl := jobtest.Dial(t, c, 3)
	const n = 4000
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(n, 10, 10, 300),
		client.JobOptions{Name: "kill-leader", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	killed := -1
	d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
		if killed < 0 && it.Stats().Batches >= 50 {
			// Leader is -1 while two nodes, or none, think they lead
			// (a loaded machine): kill at a later batch then (Kill(-1)
			// panicked, with the cluster's lock held: the cleanup hung).
			if l, _ := c.Leader(); l >= 0 {
				killed = l
				c.Kill(killed)
			}
		}
	})
	if killed < 0 {
		t.Fatal("the job ended before the kill")
	}
	jobtest.CheckExactly(t, d, n, 1)
	for w := range d.ByWorker {
		if i := c.Index(w); i < 3 {
			t.Errorf("control-only node %s delivered batches", w)
		}
	}
	t.Logf("killed leader %s; %d batches from %v", c.Name(killed), d.Batches, jobtest.Keys(d.ByWorker))
}

// Test 6: a node that joins mid-job starts serving it.
func TestNodeJoinsMidJob(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(8000, 20, 10, 300),
		client.JobOptions{Name: "join", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	added := -1
	d := jobtest.Drain(t, it, 60*time.Second, func(b client.Batch) {
		if added < 0 && it.Stats().Batches >= 20 {
			var err error
			if added, err = c.Add(); err != nil {
				t.Fatal(err)
			}
		}
	})
	jobtest.CheckExactly(t, d, 8000, 1)
	if len(d.ByWorker[c.Name(added)]) == 0 {
		t.Fatalf("the node that joined (%s) delivered nothing: %v", c.Name(added), jobtest.Keys(d.ByWorker))
	}
	t.Logf("new node %s delivered %d of 8000 elements", c.Name(added), len(d.ByWorker[c.Name(added)]))
}

// Test 7: a client that disappears: its lease expires and the job is
// garbage-collected, and the workers stop its tasks.
func TestAbandonedJobIsCollected(t *testing.T) {
	c := testcluster.Start(t, 3)
	fast := transport.FastConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.Node(1).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(100000, 100, 10, 100), client.JobOptions{
		Name: "abandoned", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, ConsumerTTL: 500 * time.Millisecond, GCAfter: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(ctx); err != nil {
		t.Fatal(err)
	}
	// The client vanishes: its socket closes, no detach is sent.
	cl.Close()
	c.WaitFor(t, 15*time.Second, "the job to be garbage-collected", func() bool {
		_, leader := c.Leader()
		if leader == nil {
			return false // an election is under way
		}
		_, ok := leader.Raft().Job("abandoned")
		return !ok
	})
	waitNoTasks(t, c, 15*time.Second)
	it.Close()
}

// waitNoTasks waits until no running node has a task.
func waitNoTasks(t *testing.T, c *testcluster.Cluster, timeout time.Duration) {
	t.Helper()
	c.WaitFor(t, timeout, "the workers to stop the job's tasks", func() bool {
		for _, i := range c.Running() {
			if len(c.Node(i).Tasks()) > 0 {
				return false
			}
		}
		return true
	})
}

// Test 8: bad input gets a clear error and loses nothing.
func TestJobBadInput(t *testing.T) {
	data := t.TempDir() // the nodes' data root
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.DataRoots = []string{data} }))
	cl := jobtest.Dial(t, c, 0)
	ctx := context.Background()

	t.Run("invalid spec", func(t *testing.T) {
		bad := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 10}}).Shuffle(0, 1)
		_, err := cl.Distribute(ctx, bad, client.JobOptions{Name: "bad"})
		if err == nil || !strings.Contains(err.Error(), "shuffle.buffer") {
			t.Fatalf("err = %v, want a validation error naming shuffle.buffer", err)
		}
		jobs, err := cl.Jobs(ctx)
		if err != nil || len(jobs) != 0 {
			t.Fatalf("jobs after a rejected spec: %v %v", jobs, err)
		}
	})
	t.Run("unknown job", func(t *testing.T) {
		_, err := cl.Attach(ctx, "no-such-job")
		if !errors.Is(err, transport.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("mismatched options", func(t *testing.T) {
		it, err := cl.Distribute(ctx, jobtest.RangeSpec(100, 10, 10), client.JobOptions{Name: "opts", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		_, err = cl.Distribute(ctx, jobtest.RangeSpec(100, 10, 10), client.JobOptions{Name: "opts", Sharding: client.Off})
		if err == nil || !strings.Contains(err.Error(), "sharding") {
			t.Fatalf("err = %v, want an error naming the sharding difference", err)
		}
		t.Logf("mismatch: %v", err)
	})
	t.Run("client never grants credit", func(t *testing.T) {
		const window = 2
		fast := transport.FastConfig()
		// One stream, WindowBytes off: the window stays at 2 batches (with it, these
		// 80-byte batches would grow it to the worker's cap of 64).
		slow, err := client.Dial(ctx, c.Node(1).Addr(), client.Options{Transport: &fast, Window: window, WindowBytes: -1, StreamsPerWorker: 1, PrefetchBatches: 1, HeartbeatInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		it, err := slow.Distribute(ctx, jobtest.RangeSpec(1_000_000, 1000, 10), client.JobOptions{Name: "stalled", Sharding: client.Off})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		// Never call Next. Per worker: window in flight, one held by the
		// client's stream reader, TaskBuffer queued, one being encoded.
		bound := int64(window + 1 + mesh.FastConfig().Worker.TaskBuffer + 1 + 1)
		produced := func() (max int64) {
			for _, i := range c.Running() {
				for _, ts := range c.Node(i).Tasks() {
					if ts.Job == "stalled" {
						max = maxInt(max, ts.Produced)
					}
				}
			}
			return max
		}
		c.WaitFor(t, 10*time.Second, "the tasks to fill their bounds", func() bool { return produced() >= bound-2 })
		if testcluster.Poll(500*time.Millisecond, func() bool { return produced() > bound }) {
			t.Fatalf("a task produced %d batches for a client that reads nothing (bound %d)", produced(), bound)
		}
	})
	t.Run("pipeline error on a split", func(t *testing.T) {
		dir := data
		good := filepath.Join(dir, "a.tfrecord")
		corrupt := filepath.Join(dir, "b.tfrecord")
		for _, p := range []string{good, corrupt} {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10; i++ {
				formats.WriteTFRecord(f, []byte("record-"+p))
			}
			f.Close()
		}
		b, _ := os.ReadFile(corrupt)
		b[len(b)/2] ^= 0xff // flip a byte in the middle: a CRC mismatch
		os.WriteFile(corrupt, b, 0o644)
		spec := pipeline.NewSpec(pipeline.FromFiles("tfrecord", filepath.Join(dir, "*.tfrecord")))
		it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "corrupt", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var rerr error
		for {
			if _, rerr = it.Next(rctx); rerr != nil {
				break
			}
		}
		if rerr == nil || !strings.Contains(rerr.Error(), "b.tfrecord") || !strings.Contains(rerr.Error(), "split") {
			t.Fatalf("err = %v, want the worker's error naming the split and file", rerr)
		}
		t.Logf("job failed with: %v", rerr)
	})
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
