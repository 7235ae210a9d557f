package mesh_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// repeatElements is the dataset TestDynamicJobRefusesRepeat reads.
const repeatElements = 100

// readAll reads a job to its end and returns the elements it had; the
// read must end with io.EOF.
func readAll(ctx context.Context, t *testing.T, cl *client.Client, spec *pipeline.Spec, o client.JobOptions) int64 {
	t.Helper()
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		t.Fatalf("%s: distribute: %v", o.Name, err)
	}
	defer it.Close()
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return it.Stats().Rows
		}
		if err != nil {
			t.Fatalf("%s: after %d elements: %v", o.Name, it.Stats().Rows, err)
		}
		b.Release()
	}
}

// TestDynamicJobRefusesRepeat: a DYNAMIC job's workers lease each epoch's
// splits once, so a repeat in its spec reads one pass only. Such a job
// used to be accepted and to end after one pass with a plain io.EOF
// (feedmesh-bench vision's train-node with --images above the folder's
// size failed with "EOF"); it is refused at Distribute, by the client and
// again by the node, with an error naming repeat and epochs. The job's
// epochs read the passes; with sharding off, repeat still repeats.
func TestDynamicJobRefusesRepeat(t *testing.T) {
	c := testcluster.Start(t, 1)
	_, n := c.WaitLeader(t, 20*time.Second)
	cl := dialNode(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := func(repeat bool) *pipeline.Spec {
		s := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: repeatElements, Seed: 1, SplitSize: 10}))
		if repeat {
			s.Repeat(2)
		}
		return s.Batch(10, false)
	}
	dyn := client.JobOptions{Name: "repeat-dynamic", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}

	// The client refuses before anything is sent.
	it, err := cl.Distribute(ctx, spec(true), dyn)
	if err == nil {
		var rows int64
		for {
			b, err := it.Next(ctx)
			if err != nil {
				t.Logf("the accepted job's read ended: %v", err)
				break
			}
			b.Release()
			rows = it.Stats().Rows
		}
		it.Close()
		t.Fatalf("a DYNAMIC job whose spec repeats twice was accepted and read %d elements (its spec asks for %d): want a refusal at Distribute", rows, 2*repeatElements)
	}
	if !errors.Is(err, client.ErrJobOptions) || !strings.Contains(err.Error(), "repeat") || !strings.Contains(err.Error(), "epochs") {
		t.Fatalf("distribute with repeat under sharding dynamic: %v, want an ErrJobOptions naming repeat and epochs", err)
	}
	t.Logf("client: %v", err)

	// The node refuses it too (a client that skips the check).
	canon, err := spec(true).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Distribute(ctx, api.DistributeRequest{Spec: canon, Options: api.JobOptions{Name: "repeat-raw", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}, Consumer: "c0"})
	if err == nil || !strings.Contains(err.Error(), "repeat") {
		t.Fatalf("the node took a DYNAMIC job whose spec repeats: %v, want a refusal naming repeat", err)
	}
	t.Logf("node: %v", err)

	// What to do instead: epochs 2 reads both passes and ends.
	dyn.Epochs = 2
	if got := readAll(ctx, t, cl, spec(false), dyn); got != 2*repeatElements {
		t.Errorf("DYNAMIC, epochs 2: read %d elements, want %d", got, 2*repeatElements)
	}
	// With sharding off (each worker reads the whole dataset) repeat
	// repeats.
	off := client.JobOptions{Name: "repeat-off", Sharding: client.Off, Workers: client.AllWorkers}
	if got := readAll(ctx, t, cl, spec(true), off); got != 2*repeatElements {
		t.Errorf("sharding off, repeat 2: read %d elements, want %d", got, 2*repeatElements)
	}
}
