package failover

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestRollingRestartDrains (issue 14, item 3): every node of a 5-node
// cluster is stopped gracefully (its drain hands back the splits it has
// not started, reads the one in progress and lets the consumer read what
// is queued) and started again from its data dir, one after the other,
// while a DYNAMIC job is read. At-most-once loses nothing (before the
// drain it lost what each stopping node held); exactly-once reads nothing
// again (before, each stop orphaned what the node held, and it was read
// again from its source).
func TestRollingRestartDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts 5 nodes one by one")
	}
	for _, delivery := range []string{client.AtMostOnce, client.ExactlyOnce} {
		t.Run(delivery, func(t *testing.T) {
			// Drains must complete here: at-most-once, a node whose
			// hand-back is refused (every split handed out) reads what it
			// holds itself, which on loaded cores took longer than the
			// fast preset's 10 s once (a drain cut short loses, counted).
			c := testcluster.Start(t, 5, testcluster.WithVoters(3),
				testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.DrainTimeout = time.Minute }))
			const n = 20000
			cl := jobtest.Dial(t, c, 0)
			it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 50, 10, 200),
				client.JobOptions{Name: "drain", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Delivery: delivery})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()

			// The restarts run beside the reading: a drain waits for the
			// consumer to read what the node has queued.
			at := make(chan int64, 1)
			var wg sync.WaitGroup
			var stops []time.Duration
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					for b := range at {
						if b >= int64(100*(i+1)) { // one node every ~100 batches
							break
						}
					}
					t0 := time.Now()
					if err := c.Stop(i); err != nil {
						t.Errorf("stop %s: %v", c.Name(i), err)
					}
					stops = append(stops, time.Since(t0).Round(time.Millisecond))
					if err := c.Restart(i); err != nil {
						t.Errorf("restart %s: %v", c.Name(i), err)
						return
					}
					if err := c.Wait(30*time.Second, c.Name(i)+" back", func() bool { return jobtest.Alive(c, i) }); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			d := jobtest.Drain(t, it, 180*time.Second, func(client.Batch) {
				select {
				case at <- it.Stats().Batches:
				default:
				}
			})
			close(at)
			wg.Wait()
			if len(stops) < 5 {
				t.Fatalf("the job ended after %d of 5 restarts", len(stops))
			}
			jobtest.CheckExactly(t, d, n, 1)
			st := it.Stats()
			if st.SplitsLost != 0 || st.WorkersDropped != 0 {
				t.Errorf("%d splits counted lost, %d workers dropped: a drained worker is neither", st.SplitsLost, st.WorkersDropped)
			}
			if st.Exact != nil && st.Exact.Requeued != 0 {
				t.Errorf("exactly-once read %d splits again: the drains left some held", st.Exact.Requeued)
			}
			t.Logf("%s: %d batches; 5 nodes drained and restarted, stops took %v; lost %d splits; exactly-once counters %+v; reconnects %d",
				delivery, d.Batches, stops, st.SplitsLost, st.Exact, st.Reconnects)
		})
	}
}

// TestKilledWorkerRejoins: a worker SIGKILLed mid-job (declared dead, its
// splits read again or lost) and started again from its data dir rejoins
// the job as a newer process and delivers again; no element arrives twice
// (and, exactly-once, none is missing). Before, a worker declared dead was
// out of its jobs for good, so a cluster whose nodes were each restarted
// once ran its jobs on no worker at all.
func TestKilledWorkerRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a node mid-job")
	}
	for _, delivery := range []string{client.AtMostOnce, client.ExactlyOnce} {
		t.Run(delivery, func(t *testing.T) {
			c := testcluster.Start(t, 3)
			// Long enough that splits are left for the new process after
			// the kill, the expiry and the restart: each survivor keeps
			// FailoverAhead of work leased ahead. With 12,000 elements the
			// new process once delivered nothing in CI (at-most-once),
			// most likely because the survivors held the rest of the job.
			const n = 36000
			cl := jobtest.Dial(t, c, 0)
			it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 50, 10, 300),
				client.JobOptions{Name: "rejoin", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Delivery: delivery})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			const victim = 2
			var restarted bool
			var after int // batches the victim's new process delivered
			d := jobtest.Drain(t, it, 120*time.Second, func(b client.Batch) {
				switch {
				case !restarted && it.Stats().Batches >= 100:
					restarted = true
					c.Kill(victim)
					// Declared dead and expired from the job (else a quick
					// restart is the same worker's new incarnation, with no
					// rejoin to see).
					c.WaitFor(t, 20*time.Second, c.Name(victim)+" expired from the job", func() bool {
						_, l := c.Leader()
						if l == nil {
							return false
						}
						v, ok := l.Raft().Job("rejoin")
						return ok && v.Workers[c.Name(victim)].Expired
					})
					if err := c.Restart(victim); err != nil {
						t.Fatal(err)
					}
				case restarted && b.Worker == c.Name(victim):
					after++
				}
			})
			if !restarted {
				t.Fatal("the job ended before the kill")
			}
			missing, twice := 0, 0
			for v := int64(0); v < n; v++ {
				switch k := d.Counts[v]; {
				case k == 0:
					missing++
				case k > 1:
					twice++
				}
			}
			st := it.Stats()
			if twice > 0 || (delivery == client.ExactlyOnce && missing > 0) {
				t.Fatalf("%d elements missing, %d delivered twice", missing, twice)
			}
			if after == 0 {
				t.Fatalf("%s's new process delivered nothing: it did not rejoin the job", c.Name(victim))
			}
			if st.WorkersDropped != 1 {
				t.Errorf("workers dropped %d, want 1 (the killed one)", st.WorkersDropped)
			}
			t.Logf("%s: %s killed at batch 100 and restarted; its new process delivered %d of %d batches; %d elements missing (%d splits counted lost); exactly-once %+v",
				delivery, c.Name(victim), after, d.Batches, missing, st.SplitsLost, st.Exact)
		})
	}
}
