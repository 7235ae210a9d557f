package autoscale

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
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
	cl := jobtest.Dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(10_000_000, 20, 4, 2000), client.JobOptions{Name: "grow", Sharding: client.Dynamic, Offload: client.OffloadRemote, Autoscale: true})
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

// A consumer that slows down makes its job shed workers: the result
// queue grows past the converged one, the policy scales down, the leader
// releases workers (AllocateJob), and each hands back the splits it has
// not started and drains. Every element is still delivered exactly once.
func TestAutoscaleShedsWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("reads for several seconds")
	}
	c := testcluster.Start(t, 4)
	cl := jobtest.Dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 40_000
	// 0.5 ms of (sleeping) work per element, 4 per batch: a worker makes
	// 500 batches/s; the slowed consumer takes 250.
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(n, 20, 4, 500), client.JobOptions{Name: "shed", Sharding: client.Dynamic, Offload: client.OffloadRemote, Autoscale: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	const (
		fast = iota
		slow
		rest
	)
	phase, peak, low, everReleased := fast, 0, 0, 0
	var last api.ScaleInfo
	var convergedAt int64 // batches, when the fast consumer saw it converge
	d := jobtest.Drain(t, it, 150*time.Second, func(b client.Batch) {
		if phase == slow {
			time.Sleep(4 * time.Millisecond) // the model's work per batch
		}
		if it.Stats().Batches%100 != 0 || phase == rest {
			return
		}
		active, released, sc := jobtest.Serving(t, ctx, cl, "shed")
		last, everReleased = sc, max(everReleased, released)
		switch phase {
		case fast:
			peak = max(peak, active)
			if convergedAt == 0 && peak >= 3 && sc.Phase == "converged" {
				convergedAt = it.Stats().Batches
			}
			// The policy records the converged queue from the first
			// metric after converging: that one still fast.
			if convergedAt > 0 && it.Stats().Batches >= convergedAt+300 {
				phase, low = slow, active
				t.Logf("converged at %d workers after %d batches; the consumer slows down", active, it.Stats().Batches)
			}
		case slow:
			low = min(low, active)
			if low <= peak-2 && released >= 2 {
				phase = rest
				t.Logf("down to %d workers (%d released) after %d batches: %s", active, released, it.Stats().Batches, sc.Reason)
			}
		}
	})
	if phase != rest {
		t.Errorf("the job did not shed workers: phase %d, peak %d, low %d, released %d; last decision %+v", phase, peak, low, everReleased, last)
	}
	jobtest.CheckExactly(t, d, n, 1)
}

// TestAutoscaleTuningReachesTheJob: a job's autoscaling knobs go through
// Raft with the job (its JobInfo shows them), and a consumer that asks
// for other knobs of the same job is refused, naming the knob.
func TestAutoscaleTuningReachesTheJob(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)
	ctx := context.Background()
	o := client.JobOptions{Name: "tuned", Sharding: client.Dynamic, Offload: client.OffloadRemote, AutoscaleThreshold: 0.2, AutoscaleRevisit: 5, AutoscalePause: -1}
	it, err := cl.Distribute(ctx, jobtest.RangeSpec(1000, 100, 10), o)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, j := range jobs {
		if j.Name == "tuned" {
			found = true
			if j.Options.AutoscaleThreshold != 0.2 || j.Options.AutoscaleRevisit != 5 || j.Options.AutoscalePause != -1 {
				t.Errorf("the job's options %+v lack the knobs asked for", j.Options)
			}
		}
	}
	if !found {
		t.Fatal("job not listed")
	}
	o.AutoscaleThreshold = 0.3
	if it2, err := cl.Distribute(ctx, jobtest.RangeSpec(1000, 100, 10), o); err == nil {
		it2.Close()
		t.Fatal("a consumer with another threshold joined the job")
	} else if !strings.Contains(err.Error(), "autoscale_threshold") {
		t.Fatalf("the refusal does not name the knob: %v", err)
	}
}
