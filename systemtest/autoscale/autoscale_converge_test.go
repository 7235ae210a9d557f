package autoscale

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
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// Test 2 of issue 16: on 6 nodes, a job whose consumer ingests at a fixed
// rate (it sleeps per batch, standing in for the model) converges to a
// worker count within ±1 of the plateau that a sweep of fixed counts
// measures, and a second job that ingests twice as fast gets more workers.
// A new job of a dataset an autoscaling job has converged on starts at
// that count.
//
// The cost per element is a sleep standing in for a worker's CPU: the
// nodes of this in-process cluster share the machine's cores (two on the
// CI machine), so a CPU cost could not scale with the workers, while a
// sleep does (each worker node waits on its own). The assertions are on
// counts, never on times: the sweep and the policy measure the same
// machine, loaded or not.
func TestAutoscaleConvergesToPlateau(t *testing.T) {
	if testing.Short() {
		t.Skip("sweeps fixed worker counts, then reads two autoscaling jobs for several seconds")
	}
	c := testcluster.Start(t, 6)
	cl := jobtest.Dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// 5 ms per element, 2 per batch: a worker makes at most 100 batches/s.
	// The slow consumer takes a batch every 8 ms (at most 125/s: the
	// plateau is 2 workers), the fast one every 4 ms (250/s: 3). Sleeps
	// of milliseconds, not microseconds, so that a loaded machine's
	// oversleeping is a small part of each.
	spec := jobtest.SlowSpec(10_000_000, 10, 2, 5000)
	// Each autoscaling job reads a dataset of its own (one element more
	// each), so that none starts where an earlier one converged
	// (docs/jobs/autoscaling.md, "A repeated job"); the last check below
	// reads one again.
	autoSpec := func(attempt, i int) *pipeline.Spec {
		return jobtest.SlowSpec(10_000_000+int64(2*attempt+i), 10, 2, 5000)
	}
	const slowModel, fastModel = 8 * time.Millisecond, 4 * time.Millisecond

	job := 0
	// rate reads a job of options o with the consumer's sleep per batch:
	// warm batches first, then measured batches, and returns batches/s.
	rate := func(o client.JobOptions, model time.Duration, warm, measured int) float64 {
		t.Helper()
		job++
		o.Name, o.Sharding, o.GCAfter, o.Offload = fmt.Sprintf("sweep-%d", job), client.Dynamic, 200*time.Millisecond, client.OffloadRemote
		it, err := cl.Distribute(ctx, spec, o)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var start time.Time
		for i := 0; i < warm+measured; i++ {
			if i == warm {
				start = time.Now()
			}
			if _, err := it.Next(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(model)
		}
		return float64(measured) / time.Since(start).Seconds()
	}
	// plateau sweeps fixed counts from 1 while each adds more than 5 % to
	// the consumer's rate, and returns the last count that did (the
	// smallest count at the plateau).
	plateau := func(model time.Duration) int {
		prev := rate(client.JobOptions{Workers: client.FixedWorkers(1)}, model, 30, 100)
		rates := []float64{prev}
		for k := 2; k <= 6; k++ {
			r := rate(client.JobOptions{Workers: client.FixedWorkers(k)}, model, 30, 100)
			rates = append(rates, r)
			if r < prev*1.05 {
				t.Logf("model %v: batches/s by fixed count %.0f: plateau at %d", model, rates, k-1)
				return k - 1
			}
			prev = r
		}
		t.Logf("model %v: batches/s by fixed count %.0f: plateau at 6", model, rates)
		return 6
	}
	slowPlateau, fastPlateau := plateau(slowModel), plateau(fastModel)

	// autoscale runs the two jobs side by side, with Workers auto, each
	// consumer at its own rate, until both converged, and returns their
	// counts.
	var lastFast string // the fast job of the last pair
	var lastFastWanted int
	autoscale := func(attempt int) (slow, fast int) {
		type reader struct {
			name  string
			model time.Duration
			err   error
		}
		readers := []*reader{{name: fmt.Sprintf("auto-slow-%d", attempt), model: slowModel}, {name: fmt.Sprintf("auto-fast-%d", attempt), model: fastModel}}
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i, r := range readers {
			it, err := cl.Distribute(ctx, autoSpec(attempt, i), client.JobOptions{Name: r.name, Sharding: client.Dynamic, Workers: client.AutoWorkers, Offload: client.OffloadRemote, GCAfter: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { // the consumer, joined below
				defer wg.Done()
				defer it.Close()
				for {
					_, err := it.Next(rctx)
					if err != nil {
						if rctx.Err() == nil && !errors.Is(err, io.EOF) {
							r.err = err
						}
						return
					}
					time.Sleep(r.model)
				}
			}()
		}
		defer func() { stop(); wg.Wait() }()
		converged := map[string]int{}
		for deadline := time.Now().Add(90 * time.Second); len(converged) < len(readers); {
			if time.Now().After(deadline) {
				jobs, _ := cl.Jobs(ctx)
				t.Fatalf("not both converged after 90 s (%v); jobs: %+v", converged, jobs)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
			for _, r := range readers {
				if _, done := converged[r.name]; done {
					continue
				}
				active, _, sc := jobtest.Serving(t, ctx, cl, r.name)
				if sc.Phase == "converged" && active == sc.Workers {
					converged[r.name] = sc.Workers
					t.Logf("%s converged at %d workers after %d changes: %s", r.name, sc.Workers, sc.Changes, sc.Reason)
				}
			}
		}
		_, _, sc := jobtest.Serving(t, ctx, cl, readers[1].name)
		lastFast, lastFastWanted = readers[1].name, sc.Wanted
		stop()
		wg.Wait()
		for _, r := range readers {
			if r.err != nil {
				t.Fatalf("%s: %v", r.name, r.err)
			}
		}
		return converged[readers[0].name], converged[readers[1].name]
	}
	// The policy measures the same loaded machine as the sweep; a job
	// that a load spike made converge one short may leave the fast job
	// level with the slow one. One more pair of fresh jobs then decides
	// (a policy that does not tell the rates apart fails both).
	slow, fast := autoscale(1)
	if fast <= slow {
		t.Logf("first pair: slow %d, fast %d workers; once more", slow, fast)
		// The first pair's jobs, detached, are collected first: they
		// would hold their nodes in the allocation.
		c.WaitFor(t, 30*time.Second, "the first pair's jobs collected", func() bool {
			jobs, err := cl.Jobs(ctx)
			if err != nil {
				return false
			}
			for _, j := range jobs {
				if strings.HasPrefix(j.Name, "auto-") {
					return false
				}
			}
			return true
		})
		slow, fast = autoscale(2)
	}
	if slow < slowPlateau-1 || slow > slowPlateau+1 {
		t.Errorf("the slow consumer's job converged at %d workers; the sweep's plateau is %d", slow, slowPlateau)
	}
	if fast < fastPlateau-1 || fast > fastPlateau+1 {
		t.Errorf("the fast consumer's job converged at %d workers; the sweep's plateau is %d", fast, fastPlateau)
	}
	if fast <= slow {
		t.Errorf("the job ingesting twice as fast got %d workers, the other %d: want more", fast, slow)
	}
	// A new job of the last fast job's dataset starts at the count that
	// job converged to, not at one worker.
	attempt := 1
	if lastFast != "auto-fast-1" {
		attempt = 2
	}
	it, err := cl.Distribute(ctx, autoSpec(attempt, 1), client.JobOptions{Name: "warm-fast", Sharding: client.Dynamic, Workers: client.AutoWorkers, Offload: client.OffloadRemote, GCAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if _, _, sc := jobtest.Serving(t, ctx, cl, "warm-fast"); sc.Workers != lastFastWanted || !strings.Contains(sc.Reason, lastFast) {
		t.Errorf("a repeated job of %s's dataset started at %d workers (%s), want %d", lastFast, sc.Workers, sc.Reason, lastFastWanted)
	} else {
		t.Logf("warm-fast: %s", sc.Reason)
	}
}
