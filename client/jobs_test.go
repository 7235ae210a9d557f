package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// rangeSpec is the dataset 0..n-1 in splits of splitSize, batched by batch.
func rangeSpec(n, splitSize, batch int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: splitSize}})
	if batch > 0 {
		s.Batch(batch, false)
	}
	return s
}

func dial(t testing.TB, c *testcluster.Cluster, i int) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(i).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// delivery is what a consumer received: element ids with counts, and
// which worker delivered each.
type delivery struct {
	counts   map[int64]int
	byWorker map[string][]int64
	batches  int
}

func values(t *testing.T, b client.Batch) []int64 {
	t.Helper()
	tv, ok := b.Get("value")
	if !ok {
		t.Fatalf("batch without tensor value: %+v", b.Element)
	}
	vs, err := tv.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func drain(t *testing.T, it *client.Iterator, timeout time.Duration, each func(client.Batch)) delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := delivery{counts: map[int64]int{}, byWorker: map[string][]int64{}}
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return d
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", d.batches, err)
		}
		d.batches++
		for _, v := range values(t, b) {
			d.counts[v]++
			d.byWorker[b.Worker] = append(d.byWorker[b.Worker], v)
		}
		if each != nil {
			each(b)
		}
	}
}

func checkExactly(t *testing.T, d delivery, n int64, times int) {
	t.Helper()
	if int64(len(d.counts)) != n {
		t.Errorf("%d distinct elements delivered, want %d", len(d.counts), n)
	}
	for v := int64(0); v < n; v++ {
		if d.counts[v] != times {
			t.Fatalf("element %d delivered %d times, want %d", v, d.counts[v], times)
		}
	}
}

// Test 1: DYNAMIC, no failures: the dataset exactly once per epoch.
func TestDynamicExactlyOnce(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := dial(t, c, 0)
	for _, epochs := range []int64{1, 3} {
		// A cost op makes the work long enough that every worker gets
		// some of it: cheap splits could all go to the first worker.
		it, err := cl.Distribute(context.Background(), slowSpec(2000, 20, 16, 200),
			client.JobOptions{Name: "dyn-" + string(rune('0'+epochs)), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: epochs})
		if err != nil {
			t.Fatal(err)
		}
		d := drain(t, it, 60*time.Second, nil)
		it.Close()
		checkExactly(t, d, 2000, int(epochs))
		if len(d.byWorker) < 2 {
			t.Errorf("epochs=%d: only %d workers delivered: %v", epochs, len(d.byWorker), keys(d.byWorker))
		}
		t.Logf("epochs=%d: %d batches from %v", epochs, d.batches, keys(d.byWorker))
	}
}

// Test 4: OFF gives every worker the whole dataset; STATIC gives each
// worker exactly the splits i mod n.
func TestOffAndStatic(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := dial(t, c, 1)
	it, err := cl.Distribute(context.Background(), rangeSpec(500, 10, 10), client.JobOptions{Name: "off", Sharding: client.Off})
	if err != nil {
		t.Fatal(err)
	}
	d := drain(t, it, 60*time.Second, nil)
	it.Close()
	checkExactly(t, d, 500, 3)
	for w, vs := range d.byWorker {
		if len(vs) != 500 {
			t.Errorf("OFF: worker %s delivered %d elements, want the whole 500", w, len(vs))
		}
	}

	it, err = cl.Distribute(context.Background(), rangeSpec(500, 10, 10), client.JobOptions{Name: "static", Sharding: client.Static})
	if err != nil {
		t.Fatal(err)
	}
	workers := it.Workers()
	d = drain(t, it, 60*time.Second, nil)
	it.Close()
	checkExactly(t, d, 500, 1)
	for i, w := range workers {
		for _, v := range d.byWorker[w.Name] {
			if split := v / 10; split%int64(len(workers)) != int64(i) {
				t.Fatalf("STATIC: worker %s (index %d of %d) delivered element %d of split %d", w.Name, i, len(workers), v, split)
			}
		}
	}
}

// Test 5: two consumers of one job together receive the dataset once.
func TestTwoConsumersShareAJob(t *testing.T) {
	c := testcluster.Start(t, 3)
	// A cost op keeps the job running for ~0.3 s: a free pipeline can be
	// drained by the first consumer before the second one joins.
	spec := slowSpec(3000, 20, 10, 300)
	opts := client.JobOptions{Name: "shared", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	a, err := dial(t, c, 0).Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dial(t, c, 2).Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	da, db := make(chan delivery, 1), make(chan delivery, 1)
	go func() { da <- drain(t, a, 60*time.Second, nil) }()
	go func() { db <- drain(t, b, 60*time.Second, nil) }()
	x, y := <-da, <-db
	a.Close()
	b.Close()
	merged := delivery{counts: map[int64]int{}}
	for v, k := range x.counts {
		merged.counts[v] += k
	}
	for v, k := range y.counts {
		if x.counts[v] > 0 {
			t.Fatalf("element %d went to both consumers", v)
		}
		merged.counts[v] += k
	}
	checkExactly(t, merged, 3000, 1)
	if x.batches == 0 || y.batches == 0 {
		t.Errorf("one consumer got nothing: %d and %d batches", x.batches, y.batches)
	}
	t.Logf("consumer A %d batches, B %d batches", x.batches, y.batches)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dumpJobOnFailure logs, when the test has failed, the named job as the
// first running node's replicated state holds it (leases, exactly-once
// bookkeeping, workers, consumers), and the iterator's counters: what a
// hang needs to be understood. Defer it after the iterator's Close, so
// that it runs first, while the consumer is still attached.
func dumpJobOnFailure(t *testing.T, c *testcluster.Cluster, job string, it *client.Iterator) {
	if !t.Failed() {
		return
	}
	if it != nil {
		t.Logf("iterator stats at failure: %+v", it.Stats())
	}
	for _, i := range c.Running() {
		v, ok := c.Node(i).Raft().Job(job)
		if !ok {
			t.Logf("%s: job %q not in its state", c.Name(i), job)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Logf("%s: job %q: %v", c.Name(i), job, err)
			continue
		}
		t.Logf("%s's state of job %q at failure: %s", c.Name(i), job, b)
		return
	}
}
