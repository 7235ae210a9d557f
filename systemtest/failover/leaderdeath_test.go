package failover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// Issue 14, item 8: a leader's death must not pause delivery. Workers lease
// splits ahead so that a failover costs nothing: with the default preset
// the largest gap between two batches a client receives around the death
// stays well under 250 ms on a quiet machine (the figure the logs give).
// The test fails above 1 s (or a few times the largest gap of an equally
// long window before it): before the fix every failover paused delivery
// 0.5 to 3.8 s, and a shared machine under load stretches a 20 ms gap past
// 250 ms now and then, which is noise, not a regression.
//
// The job is DYNAMIC over a range with a steady cost per element, read
// through a node that does not lead; the leader (also a worker) is cut off
// and then killed, as a crash: it says goodbye to no one.
func TestDeliveryRidesOutLeaderDeath(t *testing.T) {
	checkLeaderDeathGap(t, leaderDeathRun(t, false, false))
}

// The same with the default timing preset (Raft's 1 s heartbeat and
// election timeouts, 2 s forward attempts, ~3 s failure detection), which
// the 250 ms is stated for. It takes ~15 s: not in -short.
func TestDeliveryRidesOutLeaderDeathDefaultPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("default timing preset: ~15 s")
	}
	checkLeaderDeathGap(t, leaderDeathRun(t, true, false))
}

// The same, default preset, in 5 nodes where the 3 voters only coordinate
// and the 2 workers hold no Raft state: they learn the new leader through
// gossip, where the dead one still advertises itself as leader until it is
// declared dead. ~17 s: not in -short.
func TestDeliveryRidesOutLeaderDeathNonVoterWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("default timing preset: ~17 s")
	}
	checkLeaderDeathGap(t, leaderDeathRun(t, true, true))
}

type gapRun struct {
	window        time.Duration // measured before the kill, and after it
	before, after time.Duration // largest gap between batches in each
	afterAt       time.Duration // when the largest gap after the kill ended, from the kill
	batches       int
}

func (r gapRun) String() string {
	return fmt.Sprintf("largest gap between batches: %v in the %v before the leader's kill, %v in the %v after it (ending %v after the kill); %d batches",
		r.before.Round(time.Millisecond), r.window, r.after.Round(time.Millisecond), r.window, r.afterAt.Round(time.Millisecond), r.batches)
}

func checkLeaderDeathGap(t *testing.T, r gapRun) {
	t.Helper()
	t.Log(r)
	if limit := max(time.Second, 4*r.before); r.after > limit {
		t.Errorf("delivery paused %v around the leader's death, want at most %v (max(1s, 4x the %v before it))",
			r.after.Round(time.Millisecond), limit, r.before.Round(time.Millisecond))
	}
}

// defaultTiming gives a test node the default preset's timing in place of
// the fast one testcluster starts it with.
func defaultTiming(cfg *mesh.Config) {
	d := mesh.DefaultConfig()
	cfg.VoterGrace, cfg.ReconcileInterval = d.VoterGrace, d.ReconcileInterval
	cfg.RequestTimeout, cfg.ForwardAttemptTimeout = d.RequestTimeout, d.ForwardAttemptTimeout
	cfg.KnownMembersInterval = d.KnownMembersInterval
	cfg.Gossip, cfg.Transport, cfg.Raft, cfg.Worker = d.Gossip, d.Transport, d.Raft, d.Worker
}

// leaderDeathRun reads a steady DYNAMIC job through a follower for a
// window, kills the leader, reads for another window, and measures the
// largest gap between batches in each. The cluster is 3 nodes, all voters
// and workers, or with nonVoterWorkers 5: 3 voters that only coordinate
// and 2 workers outside Raft.
func leaderDeathRun(t *testing.T, defaultPreset, nonVoterWorkers bool) gapRun {
	window := 2 * time.Second
	if defaultPreset {
		window = 5 * time.Second
	}
	nodes, opts := 3, []testcluster.Option{testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		if defaultPreset {
			defaultTiming(cfg)
		}
		cfg.Worker.Disabled = nonVoterWorkers && i < 3
	})}
	if nonVoterWorkers {
		nodes, opts = 5, append(opts, testcluster.WithVoters(3))
	}
	c := testcluster.Start(t, nodes, opts...)
	leader, _ := c.WaitLeader(t, 20*time.Second)
	dialed := (leader + 1) % 3
	if nonVoterWorkers {
		dialed = 3
	}

	copts := client.Options{}
	if !defaultPreset {
		fast := transport.FastConfig()
		copts = client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.Node(dialed).Addr(), copts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// 10 ms per batch per worker, longer than the test reads.
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(200_000, 10, 10, 1000),
		client.JobOptions{Name: "leader-death", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()

	var (
		times         []time.Time
		start, killAt time.Time
		killed        = make(chan struct{})
	)
	defer func() {
		if !killAt.IsZero() {
			<-killed
		}
	}()
	const warmup = time.Second
	for {
		if _, err := it.Next(ctx); err != nil {
			t.Fatalf("after %d batches: %v", len(times), err)
		}
		now := time.Now()
		times = append(times, now)
		if start.IsZero() {
			start = now
		}
		if killAt.IsZero() && now.Sub(start) >= warmup+window {
			// On loaded cores the fast preset's leader may have moved
			// since: kill the leader of now; if it is the node read
			// through, first move leadership off it.
			if leader, _ = c.Leader(); leader == dialed {
				// Hand leadership on, then kill the new leader.
				if err := c.Node(dialed).Raft().Raft().LeadershipTransfer().Error(); err != nil {
					t.Logf("leadership transfer away from the node read through: %v", err)
				}
				c.WaitFor(t, 10*time.Second, "a leader other than the node read through", func() bool {
					leader, _ = c.Leader()
					return leader >= 0 && leader != dialed
				})
			}
			if leader < 0 {
				t.Fatalf("no leader to kill (read through: %d)", dialed)
			}
			killAt = time.Now()
			go func() {
				defer close(killed)
				c.Isolate(leader) // a crash: no goodbye packet reaches anyone
				c.Kill(leader)
			}()
		}
		if !killAt.IsZero() && now.Sub(killAt) >= window {
			break
		}
	}

	r := gapRun{window: window, batches: len(times)}
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		switch {
		case times[i-1].Before(start.Add(warmup)):
		case times[i].Before(killAt):
			r.before = max(r.before, gap)
		case gap > r.after:
			r.after, r.afterAt = gap, times[i].Sub(killAt)
		}
	}
	return r
}
