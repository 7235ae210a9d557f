//go:build chaos

package process

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
)

// TestChaos (issue 14; run by hand, see docs/testing.md, "The chaos test"):
// five real node processes; every few seconds a random node is SIGKILLed
// and restarted, paused (SIGSTOP, then SIGCONT), or stopped gracefully
// (SIGTERM: it drains) and restarted, while jobs read range datasets
// element by element, one after the other, exactly-once and at-most-once
// in turn. It checks: no element is ever delivered twice; no read hangs
// (each job ends within its deadline); no node process crashes (every exit
// is one the test caused); exactly-once jobs miss nothing; at-most-once
// jobs report their loss exactly: the elements the client's Stats say
// were lost (ElementsLost, once the job has finished) are the elements
// missing, no more, no fewer (docs/jobs/sharding-and-delivery.md).
//
//	go test -tags chaos ./systemtest/process -run TestChaos -v -timeout 20m
//
// FEEDMESH_CHAOS_DURATION (default 10m) and FEEDMESH_CHAOS_SEED set the
// run's length and its random choices.
func TestChaos(t *testing.T) {
	duration := 10 * time.Minute
	if v := os.Getenv("FEEDMESH_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("FEEDMESH_CHAOS_DURATION: %v", err)
		}
		duration = d
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("FEEDMESH_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FEEDMESH_CHAOS_SEED: %v", err)
		}
		seed = s
	}
	t.Logf("chaos for %v, seed %d", duration, seed)
	nodes := startNodes(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
	defer cancel()
	cl, _ := dialFormed(t, ctx, nodes, 0)
	defer cl.Close()

	end := time.Now().Add(duration)
	var counts struct {
		sync.Mutex
		kills, pauses, stops int
	}
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		rng := rand.New(rand.NewPCG(seed, 1))
		for time.Now().Before(end) {
			select {
			case <-time.After(time.Duration(2000+rng.IntN(3000)) * time.Millisecond):
			case <-ctx.Done():
				return
			}
			np := nodes[rng.IntN(len(nodes))]
			switch rng.IntN(3) {
			case 0:
				np.kill()
				np.start(t)
				counts.Lock()
				counts.kills++
				counts.Unlock()
			case 1:
				np.cmd.Process.Signal(syscall.SIGSTOP)
				time.Sleep(time.Duration(1000+rng.IntN(7000)) * time.Millisecond) // the pause itself is the fault injected
				np.cmd.Process.Signal(syscall.SIGCONT)
				counts.Lock()
				counts.pauses++
				counts.Unlock()
			default:
				np.stop(t, 60*time.Second)
				np.start(t)
				counts.Lock()
				counts.stops++
				counts.Unlock()
			}
		}
	}()

	const n = 20000
	jobs, missingAMO, lostAMO, splitsAMO := 0, 0, int64(0), int64(0)
	for i := 0; time.Now().Before(end); i++ {
		delivery := client.ExactlyOnce
		if i%2 == 1 {
			delivery = client.AtMostOnce
		}
		spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 50}})
		spec.Shuffle(64, uint64(i))
		spec.Cost(0, 200)
		spec.Batch(10, false)
		jctx, jcancel := context.WithTimeout(ctx, 4*time.Minute)
		it, err := cl.Distribute(jctx, spec, client.JobOptions{Name: fmt.Sprintf("chaos-%d", i), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Delivery: delivery})
		if err != nil {
			jcancel()
			t.Logf("job %d: distribute: %v (retrying with a new job)", i, err)
			continue
		}
		got := make([]int, n)
		batches := readValues(t, jctx, it, got, 1<<30, func(int) {})
		st := it.Stats()
		it.Close()
		jcancel()
		missing := 0
		for v, k := range got {
			switch {
			case k > 1:
				t.Fatalf("job %d (%s): element %d delivered %d times", i, delivery, v, k)
			case k == 0:
				missing++
			}
		}
		if delivery == client.ExactlyOnce && missing > 0 {
			t.Fatalf("job %d (exactly-once): %d elements missing; %+v", i, missing, st.Exact)
		}
		if delivery == client.AtMostOnce {
			switch {
			case !st.LossCounted:
				t.Fatalf("job %d (at-most-once): the job does not count its loss: %+v", i, st.Exact)
			case st.JobState != "finished":
				t.Fatalf("job %d (at-most-once): job %s at the end of data (its loss count is not final): %d elements missing, %d counted lost; %+v", i, st.JobState, missing, st.ElementsLost, st.Exact)
			case st.ElementsLost != int64(missing):
				t.Fatalf("job %d (at-most-once): %d elements missing, %d reported lost; %+v", i, missing, st.ElementsLost, st.Exact)
			}
			missingAMO += missing
			lostAMO += st.ElementsLost
			splitsAMO += st.SplitsLost
		}
		jobs++
		t.Logf("job %d (%s): %d batches, %d elements missing, %d reported lost (%d splits), %d workers dropped, reconnects %d", i, delivery, batches, missing, st.ElementsLost, st.SplitsLost, st.WorkersDropped, st.Reconnects)
	}
	<-chaosDone
	for _, np := range nodes {
		select {
		case err := <-np.waitErr:
			np.exited = true
			t.Errorf("%s exited on its own: %v", np.name, err)
		default:
		}
	}
	counts.Lock()
	defer counts.Unlock()
	t.Logf("%v of chaos: %d SIGKILL+restart, %d SIGSTOP/SIGCONT, %d SIGTERM+restart; %d jobs read, none with a duplicate or a hang; at-most-once: %d elements missing in all, %d reported lost (%d splits)",
		duration, counts.kills, counts.pauses, counts.stops, jobs, missingAMO, lostAMO, splitsAMO)
}
