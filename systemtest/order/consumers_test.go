package order

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// Consumer i of N (docs/jobs/deterministic-order.md, "Consumer i of
// N"): each consumer distributes a job of its own of the spec with
// order_consumer i, order_consumers N, and reads the epoch's global
// batches g with g mod N == i, in order.

const consumers = 2

// shareOf is spec() as consumer i of n.
func shareOf(i, n int64) *pipeline.Spec {
	s := spec()
	s.OrderConsumer, s.OrderConsumers = i, n
	return s
}

// interleave is the single consumer's sequence rebuilt from the
// consumers' (runs[i] is consumer i of len(runs)): global batch g of
// each epoch is the next batch of consumer g mod N. It fails unless
// every consumer's batches are used up exactly.
func interleave(t *testing.T, runs [][][]int64) [][]int64 {
	t.Helper()
	s := spec()
	s.Order, s.Seed = pipeline.OrderDeterministic, seed
	plan, ok, err := pipeline.OrderOf(s)
	if err != nil || !ok {
		t.Fatalf("order plan: %v %v", ok, err)
	}
	next := make([]int, len(runs))
	var out [][]int64
	for e := range int64(epochs) {
		l, err := plan.Layout(e)
		if err != nil {
			t.Fatal(err)
		}
		var total uint64
		for w := range l.Windows() {
			total += plan.WindowBatches(l, w)
		}
		for g := range total {
			i := int(g % uint64(len(runs)))
			if next[i] >= len(runs[i]) {
				t.Fatalf("consumer %d of %d has %d batches, global batch %d of epoch %d is its %d-th", i, len(runs), len(runs[i]), g, e, next[i])
			}
			out = append(out, runs[i][next[i]])
			next[i]++
		}
	}
	for i, r := range runs {
		if next[i] != len(r) {
			t.Fatalf("consumer %d of %d returned %d batches, its share of the global batches is %d", i, len(runs), len(r), next[i])
		}
	}
	return out
}

// readAll reads it to the end (for a goroutine: errors, not t.Fatal),
// calling each after every batch.
func readAll(it *client.Iterator, each func(r *run)) (*run, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	r := &run{workers: map[string]int{}}
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return r, fmt.Errorf("after %d batches: %w", len(r.ids), err)
		}
		ids, dg, err := batchOf(b)
		if err != nil {
			return r, err
		}
		r.ids, r.digests = append(r.ids, ids), append(r.digests, dg)
		r.workers[b.Worker]++
		if each != nil {
			each(r)
		}
	}
}

// readConsumers runs consumers 0..consumers-1 of one spec as jobs of
// their own on c, concurrently, each to the end; each (if not nil) is
// called after every batch of consumer 0. It returns each consumer's run
// and the exactly-once requeues summed over the jobs.
func readConsumers(t *testing.T, c *testcluster.Cluster, name string, bound int, each func(r *run)) ([]*run, int64) {
	return readNConsumers(t, c, consumers, name, bound, each)
}

// readNConsumers is readConsumers of consumers 0..consumers-1 of n.
func readNConsumers(t *testing.T, c *testcluster.Cluster, consumers int, name string, bound int, each func(r *run)) ([]*run, int64) {
	t.Helper()
	cl := dial(t, c)
	its := make([]*client.Iterator, consumers)
	for i := range its {
		it, err := cl.Distribute(context.Background(), shareOf(int64(i), int64(consumers)), options(fmt.Sprintf("%s-%d-of-%d", name, i, consumers), bound))
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		its[i] = it
	}
	runs := make([]*run, consumers)
	errs := make([]error, consumers)
	var wg sync.WaitGroup
	for i, it := range its {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var f func(*run)
			if i == 0 {
				f = each
			}
			runs[i], errs[i] = readAll(it, f)
		}()
	}
	wg.Wait()
	var requeued int64
	for i, it := range its {
		if errs[i] != nil {
			t.Fatalf("consumer %d of %d: %v", i, consumers, errs[i])
		}
		for _, a := range it.Audit() {
			if !a.Complete || !a.Match {
				t.Errorf("consumer %d: audit of epoch %d: %+v", i, a.Epoch, a)
			}
		}
		st := it.Stats()
		if st.Exact != nil {
			requeued += st.Exact.Requeued
		}
		t.Logf("consumer %d of %d: %d batches from workers %v; reorder %+v", i, consumers, len(runs[i].ids), runs[i].workers, *st.Reorder)
	}
	return runs, requeued
}

// TestConsumersOfNSameOn2And3Nodes: consumers 0 and 1 of 2 get, on a
// 2-node cluster and on a 3-node cluster where a worker is killed in the
// middle of a window, the same sequences byte for byte; each consumer's
// is the global batches g mod 2 == i, and together, batch by batch, they
// are the single consumer's sequence, nothing lost or repeated.
func TestConsumersOfNSameOn2And3Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters and a kill")
	}
	want := reference(t)
	var two []*run
	{
		c := testcluster.Start(t, 2)
		two, _ = readConsumers(t, c, "det-n", killBound, nil)
		c.Close()
	}
	ids := make([][][]int64, consumers)
	for i, r := range two {
		ids[i] = r.ids
	}
	same(t, "2 nodes, the consumers interleaved by global batch", interleave(t, ids), want, 0)

	c := testcluster.Start(t, 3)
	l, _ := c.WaitLeader(t, 10*time.Second)
	var mu sync.Mutex
	killed := -1
	three, requeued := readConsumers(t, c, "det-n", killBound, func(r *run) {
		mu.Lock()
		defer mu.Unlock()
		if killed >= 0 || len(r.ids) < 12 {
			return
		}
		for _, i := range []int{1, 2} {
			// A consumer's part of a window is a window's batches / N.
			if k := r.workers[c.Name(i)]; i != l && k%(block*window/batchSize/consumers) != 0 {
				killed = i
			}
		}
		if killed >= 0 {
			c.Kill(killed)
		}
	})
	if killed < 0 {
		t.Fatalf("no worker to kill was in the middle of a window of consumer 0")
	}
	t.Logf("killed %s; windows leased again %d", c.Name(killed), requeued)
	if requeued == 0 {
		t.Errorf("no window was leased again after the kill: the test shows nothing of a window made again")
	}
	for i := range consumers {
		same(t, fmt.Sprintf("consumer %d on 3 nodes through a kill", i), three[i].ids, two[i].ids, 0)
		for k := range three[i].digests {
			if three[i].digests[k] != two[i].digests[k] {
				t.Fatalf("consumer %d: batch %d's bytes differ between 2 and 3 nodes", i, k)
			}
		}
	}
}

// TestConsumersResumeKeepsN: a consumer's checkpoint resumed as consumer
// i of another count is refused up front, naming both counts.
func TestConsumersResumeKeepsN(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := dial(t, c)
	it, err := cl.Distribute(context.Background(), shareOf(1, 2), options("det-n-resume", reorderBound))
	if err != nil {
		t.Fatal(err)
	}
	r := &run{}
	read(t, it, r, 5, nil)
	ck, err := it.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	it.Close()
	o := options("det-n-resume", reorderBound)
	o.Resume = ck
	it, err = cl.Distribute(context.Background(), shareOf(1, 3), o)
	if err == nil {
		it.Close()
		t.Fatal("a checkpoint of consumer 1 of 2 resumed as consumer 1 of 3: accepted")
	}
	if want := "it is consumer 1 of 2 of a deterministic order, this spec's is consumer 1 of 3"; !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to say %q", err, want)
	}
}

// TestConsumersWindowsShorterThanN: 5 consumers, where the epoch's last
// window has 4 batches (one consumer gets nothing of it: an empty
// split), on 2 nodes: together, by global batch, they are the single
// consumer's sequence.
func TestConsumersWindowsShorterThanN(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster")
	}
	c := testcluster.Start(t, 2)
	runs, _ := readNConsumers(t, c, 5, "det-5", killBound, nil)
	ids := make([][][]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ids
	}
	same(t, "5 consumers interleaved by global batch", interleave(t, ids), reference(t), 0)
}
