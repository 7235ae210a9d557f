package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// Test 1: DYNAMIC, no failures: the dataset exactly once per epoch.
func TestDynamicExactlyOnce(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	for _, epochs := range []int64{1, 3} {
		// A cost op makes the work long enough that every worker gets
		// some of it: cheap splits could all go to the first worker.
		it, err := cl.Distribute(context.Background(), jobtest.SlowSpec(2000, 20, 16, 200),
			client.JobOptions{Name: "dyn-" + string(rune('0'+epochs)), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: epochs})
		if err != nil {
			t.Fatal(err)
		}
		d := jobtest.Drain(t, it, 60*time.Second, nil)
		it.Close()
		jobtest.CheckExactly(t, d, 2000, int(epochs))
		if len(d.ByWorker) < 2 {
			t.Errorf("epochs=%d: only %d workers delivered: %v", epochs, len(d.ByWorker), jobtest.Keys(d.ByWorker))
		}
		t.Logf("epochs=%d: %d batches from %v", epochs, d.Batches, jobtest.Keys(d.ByWorker))
	}
}

// Test 4: OFF gives every worker the whole dataset; STATIC gives each
// worker exactly the splits i mod n.
func TestOffAndStatic(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 1)
	it, err := cl.Distribute(context.Background(), jobtest.RangeSpec(500, 10, 10), client.JobOptions{Name: "off", Sharding: client.Off})
	if err != nil {
		t.Fatal(err)
	}
	d := jobtest.Drain(t, it, 60*time.Second, nil)
	it.Close()
	jobtest.CheckExactly(t, d, 500, 3)
	for w, vs := range d.ByWorker {
		if len(vs) != 500 {
			t.Errorf("OFF: worker %s delivered %d elements, want the whole 500", w, len(vs))
		}
	}

	it, err = cl.Distribute(context.Background(), jobtest.RangeSpec(500, 10, 10), client.JobOptions{Name: "static", Sharding: client.Static})
	if err != nil {
		t.Fatal(err)
	}
	workers := it.Workers()
	d = jobtest.Drain(t, it, 60*time.Second, nil)
	it.Close()
	jobtest.CheckExactly(t, d, 500, 1)
	for i, w := range workers {
		for _, v := range d.ByWorker[w.Name] {
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
	spec := jobtest.SlowSpec(3000, 20, 10, 300)
	opts := client.JobOptions{Name: "shared", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	a, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jobtest.Dial(t, c, 2).Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	da, db := make(chan jobtest.Delivery, 1), make(chan jobtest.Delivery, 1)
	go func() { da <- jobtest.Drain(t, a, 60*time.Second, nil) }()
	go func() { db <- jobtest.Drain(t, b, 60*time.Second, nil) }()
	x, y := <-da, <-db
	a.Close()
	b.Close()
	merged := jobtest.Delivery{Counts: map[int64]int{}}
	for v, k := range x.Counts {
		merged.Counts[v] += k
	}
	for v, k := range y.Counts {
		if x.Counts[v] > 0 {
			t.Fatalf("element %d went to both consumers", v)
		}
		merged.Counts[v] += k
	}
	jobtest.CheckExactly(t, merged, 3000, 1)
	if x.Batches == 0 || y.Batches == 0 {
		t.Errorf("one consumer got nothing: %d and %d batches", x.Batches, y.Batches)
	}
	t.Logf("consumer A %d batches, B %d batches", x.Batches, y.Batches)
}
