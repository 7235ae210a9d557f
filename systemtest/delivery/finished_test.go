package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestFinishedJobIsAnError (issue 38 item 2): Distribute and Attach of a
// job that has run to its end fail with ErrJobFinished, saying what to
// do, instead of an iterator that delivers nothing; the consumer they
// attached leaves at once. A resume of a finished job (a trainer that
// died before it returned the last batches) still reads what its
// checkpoint does not cover.
func TestFinishedJobIsAnError(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)
	const n = 500
	opts := client.JobOptions{Name: "finished", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	it, err := cl.Distribute(context.Background(), jobtest.RangeSpec(n, 50, 10), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Everything but the last 3 batches returned: the job finishes (every
	// element received), the checkpoint covers what was returned.
	got := jobtest.Delivery{Counts: map[int64]int{}}
	for range n/10 - 3 {
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got.Batches++
		for _, v := range jobtest.Values(t, b) {
			got.Counts[v]++
		}
	}
	ck, err := it.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, _ := jobtest.JobInfo(t, cl, opts.Name)
		if info.State == "finished" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the job did not finish: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	it.Close()

	_, err = cl.Distribute(context.Background(), jobtest.RangeSpec(n, 50, 10), opts)
	var fe *client.JobFinishedError
	if !errors.Is(err, client.ErrJobFinished) || !errors.As(err, &fe) || fe.Job != opts.Name || !strings.Contains(err.Error(), "another job name") {
		t.Fatalf("Distribute of a finished job: %v; want ErrJobFinished saying to use another job name", err)
	}
	if _, err := cl.Attach(context.Background(), opts.Name); !errors.Is(err, client.ErrJobFinished) {
		t.Fatalf("Attach to a finished job: %v; want ErrJobFinished", err)
	}
	if info, _ := jobtest.JobInfo(t, cl, opts.Name); len(info.Consumers) != 0 {
		t.Errorf("consumers after the refusals: %v; want none (they leave at once)", info.Consumers)
	}

	o := opts
	o.Resume = ck
	it, err = cl.Distribute(context.Background(), jobtest.RangeSpec(n, 50, 10), o)
	if err != nil {
		t.Fatalf("resume of a finished job: %v", err)
	}
	defer it.Close()
	rest := jobtest.Drain(t, it, 60*time.Second, nil)
	jobtest.CheckExactly(t, jobtest.Merge(got, rest), n, 1)
}
