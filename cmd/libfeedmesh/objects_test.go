package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

func dialObj(t *testing.T, addr string) *clientObj {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	c, err := client.Dial(ctx, addr, client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &clientObj{c: c, iters: map[*iterObj]uint64{}}
}

// TestIteratorObject drives the objects behind the C API from several
// goroutines, as Python threads may (it runs under -race in CI): next
// with timeouts to the end of the data, then a close that cuts a waiting
// next short, and a client close that closes its iterators.
func TestIteratorObject(t *testing.T) {
	c := testcluster.Start(t, 1)
	co := dialObj(t, c.Node(0).Addr())
	defer co.close()

	const n = 500
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Stop: n, SplitSize: 100}}).Batch(10, false)
	it, err := co.c.Distribute(context.Background(), spec, client.JobOptions{Name: "objects", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	h, err := co.open(it)
	if err != nil {
		t.Fatal(err)
	}
	o, err := typed[iterObj](h, "iterator")
	if err != nil {
		t.Fatal(err)
	}
	// Two goroutines call next (serialised by the object), a third takes
	// stats and checkpoints meanwhile.
	var (
		mu   sync.Mutex
		rows int64
		wg   sync.WaitGroup
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b, code, err := o.next(50 * time.Millisecond)
				switch code {
				case codeOK:
					mu.Lock()
					rows += b.Rows()
					mu.Unlock()
					b.Release()
				case codeTimeout:
				case codeEnd:
					return
				default:
					t.Errorf("next: code %d, %v", code, err)
					return
				}
			}
		}()
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := o.stats(); err != nil {
				t.Errorf("stats: %v", err)
			}
			if _, err := o.checkpoint(); err != nil {
				t.Errorf("checkpoint: %v", err)
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	if rows != n {
		t.Fatalf("%d rows, want %d", rows, n)
	}
	if _, code, _ := o.next(10 * time.Millisecond); code != codeEnd {
		t.Errorf("next after the end: code %d, want end", code)
	}

	// A job whose first batch never comes in time: close cuts a waiting
	// next short, which then reports closed.
	slow := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Stop: 100, SplitSize: 100}}).Cost(0, 1_000_000).Batch(100, false)
	it2, err := co.c.Distribute(context.Background(), slow, client.JobOptions{Name: "objects-slow", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, GCAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h2, err := co.open(it2)
	if err != nil {
		t.Fatal(err)
	}
	o2, _ := typed[iterObj](h2, "iterator")
	if _, code, _ := o2.next(20 * time.Millisecond); code != codeTimeout {
		t.Fatalf("next on a slow job: code %d, want timeout", code)
	}
	codes := make(chan int, 1)
	go func() {
		_, code, _ := o2.next(time.Minute)
		codes <- code
	}()
	// The client closes its open iterators (this one) first.
	if err := co.close(); err != nil {
		t.Fatalf("close the client: %v", err)
	}
	select {
	case code := <-codes:
		if code != codeClosed {
			t.Errorf("a next cut short by close: code %d, want closed", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("close did not end a waiting next")
	}
	if table.get(h2) != nil {
		t.Error("a closed client's iterator still has a handle")
	}
	if _, code, _ := o2.next(time.Millisecond); code != codeClosed {
		t.Errorf("next after close: code %d, want closed", code)
	}
	if _, err := co.open(it2); err == nil {
		t.Error("an iterator opened on a closed client")
	}
}

// TestWaitCtx: next's reusable context serves waits that end before their
// timer (call after call) and closes Done with DeadlineExceeded once one
// runs out.
func TestWaitCtx(t *testing.T) {
	c := newWaitCtx()
	for range 3 { // reused while its timer does not fire
		c.arm(time.Hour)
		if err := c.Err(); err != nil {
			t.Fatalf("Err of an armed context: %v", err)
		}
		if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
			t.Fatalf("Deadline: %v %v", d, ok)
		}
		if !c.timer.Stop() {
			t.Fatal("the timer fired an hour early")
		}
	}
	c.arm(10 * time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5 s after a 10 ms wait")
	}
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err after the wait: %v", err)
	}
	if c.timer.Stop() {
		t.Fatal("Stop of a fired timer returned true")
	}
}
