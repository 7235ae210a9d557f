package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestDeadClusterIsUnavailable (issue 38 item 2): Python's
// Client(unavailable_timeout=2) reaches client.Options, and an iteration
// over a cluster that died ends, through the C API's next, with
// FM_ERR_UNAVAILABLE (feedmesh.Unavailable) after about that long instead
// of waiting for ever; the iterator's close then returns at once.
// (systemtest/delivery's TestDeadClusterEndsIteration covers the Go
// client; this is the library's code for it.)
func TestDeadClusterIsUnavailable(t *testing.T) {
	const limit = 2 * time.Second
	c := testcluster.Start(t, 1)
	opts, _, err := clientOptions(c.Node(0).Addr(), `{"unavailable_timeout": 2, "heartbeat_interval": 0.1, "transport": "fast", "log_level": "off"}`)
	if err != nil {
		t.Fatal(err)
	}
	if opts.UnavailableTimeout != limit {
		t.Fatalf("unavailable_timeout 2 gave Options.UnavailableTimeout %v", opts.UnavailableTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	co := &clientObj{c: cl, iters: map[*iterObj]uint64{}}
	defer co.close()
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Stop: 1 << 30, SplitSize: 1 << 20}}).Batch(10, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "dead", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
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
	if _, code, err := o.next(10 * time.Second); code != codeOK {
		t.Fatalf("first batch: code %d, %v", code, err)
	}
	c.Kill(0)
	killed := time.Now()
	var code int
	for time.Since(killed) < 30*time.Second {
		var b client.Batch
		b, code, err = o.next(100 * time.Millisecond)
		if code == codeOK {
			b.Release() // what was buffered before the kill
			continue
		}
		if code != codeTimeout {
			break
		}
	}
	took := time.Since(killed)
	if code != codeUnavailable || took < limit {
		t.Fatalf("next over a dead cluster: code %d (%v) after %v; want %d (unavailable) after about %v", code, err, took, codeUnavailable, limit)
	}
	if !strings.Contains(err.Error(), "unavailable_timeout") {
		t.Errorf("the error does not name Python's keyword: %v", err)
	}
	start := time.Now()
	o.close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("close after the cluster was found unavailable took %v; want it at once", d)
	}
	t.Logf("next: code %d %v after the kill (%v); close took %v", code, took.Round(time.Millisecond), err, time.Since(start).Round(time.Millisecond))
}
