package jobtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// Dial connects a client to node i (fast transport, 100 ms heartbeats),
// closed at test cleanup.
func Dial(t testing.TB, c *testcluster.Cluster, i int) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(i).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Delivery is what a consumer received: element ids with counts, and
// which worker delivered each.
type Delivery struct {
	Counts   map[int64]int
	ByWorker map[string][]int64
	Batches  int
}

func newDelivery() Delivery {
	return Delivery{Counts: map[int64]int{}, ByWorker: map[string][]int64{}}
}

// Values is a batch's element ids (its tensor "value").
func Values(t *testing.T, b client.Batch) []int64 {
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

// Drain reads it to the end of data within timeout, calling each (may be
// nil) after every batch; an error fails the test.
func Drain(t *testing.T, it *client.Iterator, timeout time.Duration, each func(client.Batch)) Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := newDelivery()
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return d
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", d.Batches, err)
		}
		d.Batches++
		for _, v := range Values(t, b) {
			d.Counts[v]++
			d.ByWorker[b.Worker] = append(d.ByWorker[b.Worker], v)
		}
		if each != nil {
			each(b)
		}
	}
}

// CheckExactly fails unless d holds each of 0..n-1 exactly times times.
func CheckExactly(t *testing.T, d Delivery, n int64, times int) {
	t.Helper()
	if int64(len(d.Counts)) != n {
		t.Errorf("%d distinct elements delivered, want %d", len(d.Counts), n)
	}
	for v := int64(0); v < n; v++ {
		if d.Counts[v] != times {
			t.Fatalf("element %d delivered %d times, want %d", v, d.Counts[v], times)
		}
	}
}

// Collect drains it like Drain, but returns its error instead of failing
// the test, so it can run on any goroutine. hold, if not nil, is called
// after every batch (a throttled reader blocks in it).
func Collect(it *client.Iterator, timeout time.Duration, hold func(batches int)) (Delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := newDelivery()
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		if err != nil {
			return d, fmt.Errorf("job %s after %d batches: %w", it.Job(), d.Batches, err)
		}
		d.Batches++
		tv, ok := b.Get("value")
		if !ok {
			return d, fmt.Errorf("job %s: batch without tensor value", it.Job())
		}
		vs, err := tv.Int64s()
		if err != nil {
			return d, err
		}
		for _, v := range vs {
			d.Counts[v]++
			d.ByWorker[b.Worker] = append(d.ByWorker[b.Worker], v)
		}
		if hold != nil {
			hold(d.Batches)
		}
	}
}

// CollectAll drains every iterator concurrently (90 s each); holds[i] may
// be nil; done (may be nil) is called as each ends.
func CollectAll(t *testing.T, its []*client.Iterator, holds []func(int), done func(i int)) []Delivery {
	t.Helper()
	out := make([]Delivery, len(its))
	errs := make([]error, len(its))
	var wg sync.WaitGroup
	for i, it := range its {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hold func(int)
			if holds != nil {
				hold = holds[i]
			}
			out[i], errs[i] = Collect(it, 90*time.Second, hold)
			if done != nil {
				done(i)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadUntil reads it until after batches batches, takes a checkpoint and
// closes it, returning what it read and the checkpoint.
func ReadUntil(t *testing.T, it *client.Iterator, batches int) (Delivery, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := newDelivery()
	for d.Batches < batches {
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatalf("after %d batches: %v", d.Batches, err)
		}
		d.Batches++
		for _, v := range Values(t, b) {
			d.Counts[v]++
		}
	}
	ck, err := it.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return d, ck
}

// Merge adds up deliveries' counts and batches (not their workers).
func Merge(ds ...Delivery) Delivery {
	m := Delivery{Counts: map[int64]int{}}
	for _, d := range ds {
		m.Batches += d.Batches
		for v, k := range d.Counts {
			m.Counts[v] += k
		}
	}
	return m
}

// Keys is m's keys, sorted.
func Keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
