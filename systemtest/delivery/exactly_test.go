package delivery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestExactlyOnceSurvivesKills: on a 5-node cluster with 3 voters, a
// DYNAMIC job (exactly-once by default) whose pipeline shuffles, maps and
// batches loses a node mid-epoch (a worker, the Raft leader, or the node
// the client dialed): every element of every epoch still arrives exactly
// once, and the read ends by itself.
func TestExactlyOnceSurvivesKills(t *testing.T) {
	for _, tc := range []struct {
		name   string
		epochs int64
		victim func(c *testcluster.Cluster, dialed int) int
	}{
		{"worker", 1, func(c *testcluster.Cluster, dialed int) int {
			l, _ := c.WaitLeader(t, 10*time.Second)
			for i := range 5 {
				if i != l && i != dialed {
					return i
				}
			}
			return -1
		}},
		{"leader", 1, func(c *testcluster.Cluster, _ int) int { l, _ := c.WaitLeader(t, 10*time.Second); return l }},
		{"dialed", 1, func(_ *testcluster.Cluster, dialed int) int { return dialed }},
		{"worker-3-epochs", 3, func(c *testcluster.Cluster, dialed int) int {
			l, _ := c.WaitLeader(t, 10*time.Second)
			for i := 4; i >= 0; i-- {
				if i != l && i != dialed {
					return i
				}
			}
			return -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.Start(t, 5, testcluster.WithVoters(3))
			const dialed = 3
			cl := jobtest.Dial(t, c, dialed)
			const n = 4000
			it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 200),
				client.JobOptions{Name: "eo-" + tc.name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: tc.epochs})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			if got := it.Stats().Delivery; got != client.ExactlyOnce {
				t.Fatalf("a DYNAMIC job's delivery is %q, want the default %q", got, client.ExactlyOnce)
			}
			victim, killed := tc.victim(c, dialed), false
			var killedAt time.Time
			var requeued time.Duration // from the kill to the client hearing of a split leased again
			d := jobtest.Drain(t, it, 120*time.Second, func(b client.Batch) {
				if !killed && it.Stats().Batches >= 40 {
					killed, killedAt = true, time.Now()
					c.Kill(victim)
				}
				if x := it.Stats().Exact; killed && requeued == 0 && x != nil && x.Requeued > 0 {
					requeued = time.Since(killedAt)
				}
			})
			if !killed {
				t.Fatal("the job ended before the kill")
			}
			jobtest.CheckExactly(t, d, n, int(tc.epochs))
			st := it.Stats()
			again := "none leased again"
			if requeued > 0 {
				again = fmt.Sprintf("first leased again %v after the kill", requeued.Round(time.Millisecond))
			}
			t.Logf("killed %s (node %d); %d batches; splits: %s (as the client heard it, fast preset); exactly-once counters %+v; duplicates dropped by the client %d",
				c.Name(victim), victim, d.Batches, again, st.Exact, st.DuplicatesDropped)
			if st.Exact != nil && st.Exact.Duplicates != 0 {
				t.Fatalf("the cluster counted %d elements receipted twice", st.Exact.Duplicates)
			}
		})
	}
}

// TestExactlyOnceTwoConsumersWorkerKilled: two consumers of one job, a
// worker killed: together they still get every element once.
func TestExactlyOnceTwoConsumersWorkerKilled(t *testing.T) {
	c := testcluster.Start(t, 5, testcluster.WithVoters(3))
	const n = 3000
	opts := client.JobOptions{Name: "eo-two", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	a, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 300), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 300), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, _ := c.WaitLeader(t, 10*time.Second)
	victim := 4
	if l == victim {
		victim = 3
	}
	killed := make(chan struct{})
	da, db := make(chan jobtest.Delivery, 1), make(chan jobtest.Delivery, 1)
	go func() {
		da <- jobtest.Drain(t, a, 120*time.Second, func(client.Batch) {
			if a.Stats().Batches == 30 {
				c.Kill(victim)
				close(killed)
			}
		})
	}()
	go func() { db <- jobtest.Drain(t, b, 120*time.Second, nil) }()
	x, y := <-da, <-db
	select {
	case <-killed:
	default:
		t.Fatal("the job ended before the kill")
	}
	merged := jobtest.Delivery{Counts: map[int64]int{}}
	for _, dd := range []jobtest.Delivery{x, y} {
		for v, k := range dd.Counts {
			merged.Counts[v] += k
		}
	}
	jobtest.CheckExactly(t, merged, n, 1)
	t.Logf("consumer a %d batches, b %d; killed %s", x.Batches, y.Batches, fmt.Sprint(c.Name(victim)))
}

func init() {
	// A filter that keeps every element: a take after it counts per
	// worker pipeline (pipeline.FoldTakeSkip cannot apply it).
	fn.RegisterFilter("test_delivery_keep", func(*fn.FnContext, tensor.Element) (bool, error) { return true, nil })
}

// TestExactlyOnceTakes: an exactly-once DYNAMIC job's skip and take select
// positions [skip, skip+take) of the epoch's order, read by every worker
// (the nodes apply them to the source): exactly those elements arrive,
// once each. A take the nodes cannot apply (after a filter) would count
// per worker: refused at Distribute with an error that names take/skip,
// exactly-once and what in the spec made it so; the same spec runs
// at-most-once.
func TestExactlyOnceTakes(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1000, SplitSize: 10}}).Skip(95).Take(300).Batch(10, false)
	it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: "eo-take", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	d := jobtest.Drain(t, it, 30*time.Second, nil)
	it.Close()
	for v := int64(95); v < 395; v++ {
		if d.Counts[v] != 1 {
			t.Fatalf("element %d arrived %d times, want once (the window [95, 395))", v, d.Counts[v])
		}
	}
	if len(d.Counts) != 300 {
		t.Fatalf("%d distinct elements arrived, want the 300 of the window", len(d.Counts))
	}
	perWorker := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 100, SplitSize: 10}}).Filter("test_delivery_keep", nil).Take(20).Batch(10, false)
	_, err = cl.Distribute(context.Background(), perWorker, client.JobOptions{Name: "eo-take-late", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err == nil || !strings.Contains(err.Error(), "take/skip per-worker with delivery exactly-once") ||
		!strings.Contains(err.Error(), "at-most-once") || !strings.Contains(err.Error(), "op 0 (filter)") {
		t.Fatalf("a take after a filter in an exactly-once job: %v", err)
	}
	it, err = cl.Distribute(context.Background(), perWorker, client.JobOptions{Name: "amo-take-late", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: "1", Delivery: client.AtMostOnce})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if d := jobtest.Drain(t, it, 30*time.Second, nil); len(d.Counts) != 20 {
		t.Fatalf("at-most-once take(20) after a filter on one worker delivered %d elements", len(d.Counts))
	}
}

// TestExactlyOnceProduceReportsPaced: on a cheap pipeline of small splits,
// each worker sends at most one report of the splits it has emitted per
// WorkerConfig.ProduceInterval (one Raft command per epoch the report
// covers), plus the one that ends its leases: not one per split, nor one
// per Raft commit's round trip. Delivery stays exact.
func TestExactlyOnceProduceReportsPaced(t *testing.T) {
	const interval = 100 * time.Millisecond
	const workers, n, epochs = 3, 60000, 2
	c := testcluster.Start(t, workers, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.Worker.ProduceInterval = interval }))
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 10}})
	spec.Batch(32, false)
	counted := func() uint64 { return c.Node(0).Raft().AppliedCommands()["ProduceSplits"] }
	before, start := counted(), time.Now()
	it, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), spec, client.JobOptions{Name: "eo-paced", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: epochs})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	d := jobtest.Drain(t, it, 120*time.Second, nil)
	elapsed := time.Since(start)
	jobtest.CheckExactly(t, d, n, epochs)
	// Node 0 may not have applied the last reports yet: an upper bound
	// only, which is what pacing promises.
	reports := counted() - before
	// Per worker: one per interval elapsed and the last one, each split in
	// two where it crosses an epoch boundary.
	limit := uint64(workers * (int(elapsed/interval) + 2 + epochs))
	t.Logf("%d splits of 10 elements read in %v: %d produce reports (limit %d)", n/10*epochs, elapsed.Round(time.Millisecond), reports, limit)
	if reports > limit {
		t.Fatalf("%d produce reports in %v from %d workers, want at most %d (one per %v each)", reports, elapsed, workers, limit, interval)
	}
}

// TestExactlyOnceProduceReportsChunked: a report of more produced splits
// than one Raft command may carry (fsm.MaxReceipts) goes out as
// several, so a fast pipeline of tiny splits still ends, exactly once.
func TestExactlyOnceProduceReportsChunked(t *testing.T) {
	const n = fsm.MaxReceipts + 4000 // splits of one element
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(_ int, cfg *mesh.Config) {
		cfg.Worker.ProduceInterval = time.Hour // one report at the start, the rest at the end
	}))
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 1}})
	spec.Batch(256, false)
	it, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), spec, client.JobOptions{Name: "eo-chunked", Sharding: client.Dynamic, Offload: client.OffloadRemote, MaxWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	d := jobtest.Drain(t, it, 60*time.Second, nil)
	jobtest.CheckExactly(t, d, n, 1)
	if x := it.Stats().Exact; x == nil || x.Duplicates != 0 {
		t.Fatalf("exactly-once counters %+v", x)
	}
}
