package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/testcluster"
)

// An autoscaling job starts on one worker and gets more while they
// improve its consumer's batch time: a pipeline that waits 2 ms per
// element and a consumer that takes batches as fast as they come gain
// from every worker, up to the 4 nodes.
func TestAutoscaleGrows(t *testing.T) {
	if testing.Short() {
		t.Skip("reads for several seconds")
	}
	c := testcluster.Start(t, 4)
	cl := dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	it, err := cl.Distribute(ctx, slowSpec(10_000_000, 20, 4, 2000), client.JobOptions{Name: "grow", Sharding: client.Dynamic, Autoscale: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	serving := func() (int, int) {
		jobs, err := cl.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Name == "grow" && j.Scale != nil {
				n := 0
				for _, w := range j.Workers {
					if !w.Expired {
						n++
					}
				}
				return n, j.Scale.Workers
			}
		}
		t.Fatal("no autoscaling job grow")
		return 0, 0
	}
	for i := 0; i < 30; i++ {
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, want := serving(); n != 1 || want != 1 {
		t.Fatalf("at first: %d workers serving, %d wanted; want 1 and 1", n, want)
	}
	peak := 0
	for deadline := time.Now().Add(90 * time.Second); peak < 3; {
		for i := 0; i < 50; i++ {
			if _, err := it.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		n, _ := serving()
		peak = max(peak, n)
		if time.Now().After(deadline) {
			jobs, _ := cl.Jobs(ctx)
			t.Fatalf("after 90 s: %d workers at most; the job: %+v", peak, jobs)
		}
	}
}
