package offload

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/slowlink"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// localBatches splits a delivery's elements by who prepared them: this
// consumer's local worker or the nodes.
func localRows(d jobtest.Delivery) (local, remote int) {
	for w, vs := range d.ByWorker {
		if _, ok := jobspec.LocalWorkerOf(w); ok {
			local += len(vs)
		} else {
			remote += len(vs)
		}
	}
	return local, remote
}

// TestOffloadModes: a DYNAMIC exactly-once job read with each fixed
// offload mode delivers every element exactly once, for 2 epochs; with
// local the nodes prepare nothing, with remote the client nothing, with a
// fraction both a part near it; the stats say the mode and the counts.
func TestOffloadModes(t *testing.T) {
	c := testcluster.Start(t, 2, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.Worker.FailoverAhead = -1 }))
	cl := jobtest.Dial(t, c, 0)
	const n = 4000
	for _, tc := range []struct {
		offload        string
		minLoc, maxLoc float64
		// sleepUs is the pipeline's cost per element. The nodes run
		// without FailoverAhead: with it each node keeps that much work
		// leased ahead (300 ms in the fast preset), and on loaded cores
		// the two nodes held nearly all of an epoch's splits while the
		// local worker, out of splits, waited for the epoch's end (shares
		// of 0.01 to 0.09; with it off, 0.20 to 0.29 with three busy loops
		// on the two cores). How many splits the nodes hold ahead of a
		// local worker is the fraction's known limit
		// (docs/jobs/offload.md, "Under failure"); this test is about the gate.
		sleepUs int64
	}{
		{"remote", 0, 0, 200},
		{"local", 1, 1, 200},
		{"0.5", 0.1, 0.6, 1000},
	} {
		t.Run(tc.offload, func(t *testing.T) {
			opts := client.JobOptions{Name: "offload-" + tc.offload, Sharding: client.Dynamic, Workers: client.AllWorkers, Epochs: 2, Offload: tc.offload, LocalCPUs: 1}
			it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 10, 10, tc.sleepUs), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			d := jobtest.Drain(t, it, 90*time.Second, nil)
			jobtest.CheckExactly(t, d, n, 2)
			loc, rem := localRows(d)
			share := float64(loc) / float64(loc+rem)
			st := it.Stats()
			t.Logf("offload %s: local %d rows, remote %d (share %.2f); stats %+v", tc.offload, loc, rem, share, *st.Offload)
			if share < tc.minLoc || share > tc.maxLoc {
				t.Errorf("local share %.2f, want [%.2f, %.2f]", share, tc.minLoc, tc.maxLoc)
			}
			if st.Offload == nil || st.Offload.Requested == "" || st.Offload.Reason == "" {
				t.Errorf("offload stats %+v", st.Offload)
			}
			if st.Exact == nil || st.Exact.Duplicates != 0 {
				t.Errorf("exactly-once counters %+v", st.Exact)
			}
		})
	}
}

// TestOffloadBadInput: a local budget of 0, an unknown mode, and a
// pipeline op this process does not have are refused with errors that
// say so; offload local on a job that is not DYNAMIC too.
func TestOffloadBadInput(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)
	spec := jobtest.ShuffledSpec(100, 10, 10, 1)
	for _, tc := range []struct {
		name string
		o    client.JobOptions
		want string
	}{
		{"mode", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: "sideways"}, "want auto, remote, local"},
		{"fraction", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: "1.5"}, "local fraction in [0, 1]"},
		{"budget", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: "local", LocalCPUs: 0.01}, "local CPU budget"},
		{"negative-budget", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: "local", LocalCPUs: -1}, "local_cpus"},
		{"not-dynamic", client.JobOptions{Offload: "local"}, "needs sharding dynamic"},
		{"cut-past-end", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: 4}, "the pipeline has 4 ops"},
		{"cut-after-batch", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: 4}, "cut points: 1..3"},
		{"cut-local", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: "local", OffloadBoundary: 2}, "a local worker beside a cut is not built"},
		{"cut-at-most-once", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Delivery: client.AtMostOnce, OffloadBoundary: 2}, "needs delivery exactly-once"},
		{"cut-share", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, Share: true, OffloadBoundary: 2}, "offload_boundary: only for sharding dynamic"},
		{"negative-cut", client.JobOptions{Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: -1}, "offload_boundary -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Name = "bad-" + tc.name
			_, err := cl.Distribute(context.Background(), spec, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// readPaced drains it as a training loop taking step per batch.
func readPaced(t *testing.T, it *client.Iterator, step time.Duration) jobtest.Delivery {
	return jobtest.Drain(t, it, 120*time.Second, func(client.Batch) {
		time.Sleep(step) // the training step's own work, not a wait for a condition
	})
}

// TestOffloadAuto: with no stall locally (a slow training loop, a cheap
// pipeline) auto keeps everything local and never turns the nodes on;
// with a pipeline the host cannot keep up with (a fast loop, an
// expensive pipeline on a local budget of one core) it offloads: the
// nodes prepare a share, the local worker the rest. Both exactly once;
// the stats carry the profile, the decision's reason and the prediction.
func TestOffloadAuto(t *testing.T) {
	c := testcluster.Start(t, 2)
	ctx := context.Background()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadProfiles: "off", OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	t.Run("no-stall", func(t *testing.T) {
		const n = 800
		it, err := cl.Distribute(ctx, jobtest.ShuffledSpec(n, 10, 10, 1), client.JobOptions{Name: "auto-nostall", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		d := readPaced(t, it, 25*time.Millisecond) // 400 rows/s at most
		jobtest.CheckExactly(t, d, n, 1)
		st := it.Stats().Offload
		t.Logf("%+v profile %+v", *st, st.Profile)
		if st.Mode != "local" || st.RemoteBatches != 0 || st.Profile == nil || !strings.Contains(st.Reason, "no stall") {
			t.Fatalf("auto without a stall: %+v", *st)
		}
		info, _ := jobtest.JobInfo(t, cl, "auto-nostall")
		if !info.RemoteOff {
			t.Errorf("the nodes were turned on: %+v", info)
		}
	})
	t.Run("stall", func(t *testing.T) {
		const n = 3000
		it, err := cl.Distribute(ctx, jobtest.ShuffledSpec(n, 10, 10, 2000), client.JobOptions{Name: "auto-stall", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		d := jobtest.Drain(t, it, 120*time.Second, nil)
		jobtest.CheckExactly(t, d, n, 1)
		st := it.Stats().Offload
		t.Logf("%+v profile %+v", *st, st.Profile)
		if st.Mode == "local" || st.RemoteBatches == 0 || st.LocalBatches == 0 || st.Predicted <= 0 {
			t.Fatalf("auto with a stall: %+v", *st)
		}
	})
}

// TestOffloadShareMoves: under auto, the local worker's share follows the
// nodes: it rises when one of the three nodes dies, and falls again when
// a node joins (revision every AutoReviseInterval, from measured rates
// and the number of nodes serving the job).
func TestOffloadShareMoves(t *testing.T) {
	c := testcluster.Start(t, 3)
	ctx := context.Background()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadProfiles: "off", OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1 << 22, SplitSize: 10}})
	spec.Map("cost", fn.Args{"sleep_us": 2000}, 1) // 500 rows/s per node, 1500 locally (3 cores)
	spec.Batch(10, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "auto-moves", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 3})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := it.Next(rctx)
			if err != nil {
				return
			}
			b.Release()
		}
	}()
	defer func() { cancel(); <-done; it.Close() }()
	share := func() (float64, string) {
		st := it.Stats().Offload
		return st.Fraction, st.Mode
	}
	waitShare := func(what string, ok func(float64) bool) float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			f, mode := share()
			if strings.HasPrefix(mode, "fraction=") && ok(f) {
				return f
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the local share is %v (%s) after 60 s; stats %+v", what, f, mode, *it.Stats().Offload)
			}
			time.Sleep(50 * time.Millisecond) // polling the iterator's stats
		}
	}
	before := waitShare("offloading", func(f float64) bool { return f < 0.95 })
	l, _ := c.WaitLeader(t, 10*time.Second)
	victim := 1
	if l == 1 {
		victim = 2
	}
	c.Kill(victim) // neither the leader nor the node dialed
	after := waitShare("after a node died", func(f float64) bool { return f >= before+0.05 })
	// The share may go on rising over the next revisions (the first one
	// to see the death may still have measured the dead node's batches):
	// the share the join must lower is the highest of the next two.
	for end := time.Now().Add(2 * client.AutoReviseInterval); time.Now().Before(end); {
		if f, mode := share(); strings.HasPrefix(mode, "fraction=") {
			after = max(after, f)
		}
		time.Sleep(50 * time.Millisecond) // sampling the share over two revisions
	}
	if _, err := c.Add(); err != nil {
		t.Fatal(err)
	}
	joined := waitShare("after a node joined", func(f float64) bool { return f <= after-0.05 })
	t.Logf("local share %.2f with 3 nodes, %.2f after one died, %.2f after one joined; stats %+v", before, after, joined, *it.Stats().Offload)
}

// TestOffloadAutoLockstepConsumers: two consumers of one DYNAMIC job read
// in lock step, as data-parallel trainers do (each step takes one batch
// from every rank). A local worker's batches reach only its own consumer,
// so a local worker holding splits while its consumer waits for the other
// rank would stall both at the end of the data; offload auto therefore
// stays remote for a consumer that joins a job with others, and retires
// the local worker of the consumer that was first (its unread splits go
// to the nodes, exactly-once). Every element arrives once and the read
// ends.
func TestOffloadAutoLockstepConsumers(t *testing.T) {
	c := testcluster.Start(t, 2)
	const n = 3000
	spec := jobtest.ShuffledSpec(n, 50, 10, 100)
	name := "offload-lockstep"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d := jobtest.Delivery{Counts: map[int64]int{}, ByWorker: map[string][]int64{}}
	next := func(i int, it *client.Iterator) bool {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			t.Fatalf("consumer %d after %d batches in all: %v; stats %+v", i, d.Batches, err, it.Stats().Offload)
		}
		d.Batches++
		for _, v := range jobtest.Values(t, b) {
			d.Counts[v]++
			d.ByWorker[b.Worker] = append(d.ByWorker[b.Worker], v)
		}
		return true
	}
	its := make([]*client.Iterator, 2)
	for i := range its {
		cl := jobtest.Dial(t, c, i)
		it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: name, Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		its[i] = it
		if i == 0 {
			// The first rank reads a little alone: its local worker
			// leases splits and fills its buffer before the second joins.
			for range 5 {
				next(0, it)
			}
		}
	}
	done := make([]bool, len(its))
	for left := len(its); left > 0; {
		for i, it := range its {
			if !done[i] && !next(i, it) {
				done[i], left = true, left-1
			}
		}
	}
	jobtest.CheckExactly(t, d, n, 1)
	for i, it := range its {
		o := it.Stats().Offload
		t.Logf("consumer %d: offload %s (%s), local %d remote %d batches", i, o.Mode, o.Reason, o.LocalBatches, o.RemoteBatches)
		if o.Mode != client.OffloadRemote || !strings.Contains(o.Reason, "consumers") {
			t.Errorf("consumer %d: offload %q (%s), want remote because of the other consumer", i, o.Mode, o.Reason)
		}
	}
}

// TestOffloadAtMostOnceEnds: an at-most-once job read with a local worker
// (local, or a fraction beside the nodes) ends by itself with every
// element once when nothing fails, and no split shows lost: the local
// worker reports the splits it finished, as a node does, so the job's end
// (every split finished) comes and the node assigned before the offload
// request is told it is done. (A fraction under at-most-once was refused
// until the local worker ran the census itself: a node that died holding
// splits left a census no worker ran, and the job never ended;
// systemtest/compose's TestFractionAtMostOnceCountsLoss kills one.)
func TestOffloadAtMostOnceEnds(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	const n = 20000
	for _, mode := range []string{"local", "0.5"} {
		t.Run(mode, func(t *testing.T) {
			it, err := cl.Distribute(context.Background(), jobtest.RangeSpec(n, 500, 100),
				client.JobOptions{Name: "amo-" + mode, Sharding: client.Dynamic, Delivery: client.AtMostOnce, Offload: mode, LocalCPUs: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			d := jobtest.Drain(t, it, 60*time.Second, nil)
			jobtest.CheckExactly(t, d, n, 1)
			if st := it.Stats(); st.SplitsLost != 0 {
				t.Errorf("offload %s: %d splits lost, want 0 (stats %+v)", mode, st.SplitsLost, st)
			}
		})
	}
}

// TestOffloadAutoSlowLink: the client's host reads the nodes over a slow
// link (1 MB/s into the host) and the pipeline's last op (2 ms) makes
// each element 64 KiB, so the two nodes can deliver about 15 elements/s
// however fast they compute, while the host's local worker alone makes
// about 500. The first op costs next to nothing (1 µs), so no cut pays either
// (the host would run the whole cost after it). Auto probes the link
// while it profiles the host, finds the nodes would add less than the
// 10 % threshold, and stays local: the nodes are never turned on, and
// deliver nothing. Every element arrives exactly once.
func TestOffloadAutoSlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("reads over an emulated 1 MB/s link")
	}
	c := testcluster.Start(t, 2)
	ctx := context.Background()
	cl := dialSlowLink(t, c, "off")
	const n = 2000
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
	spec.Map("cost", fn.Args{"sleep_us": 1}, 1)
	spec.Map("cost", fn.Args{"sleep_us": 2000, "out_bytes": 64 << 10}, 1)
	spec.Batch(10, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "auto-slowlink", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	// The decision after the profile, as the stats show it while the job
	// runs, and whether the nodes were ever on.
	var decided *client.OffloadStats
	remoteOn := false
	d := jobtest.Drain(t, it, 120*time.Second, func(client.Batch) {
		if info, _ := jobtest.JobInfo(t, cl, "auto-slowlink"); !info.RemoteOff {
			remoteOn = true
		}
		if st := it.Stats().Offload; decided == nil && st != nil && st.Profile != nil {
			decided = st
		}
	})
	jobtest.CheckExactly(t, d, n, 1)
	if decided == nil {
		t.Fatalf("auto never decided: %+v", *it.Stats().Offload)
	}
	st := it.Stats()
	t.Logf("decided %+v profile %+v; at the end %+v, workers %+v", *decided, *decided.Profile, *st.Offload, st.Workers)
	if decided.Mode != "local" || !strings.Contains(decided.Reason, "does not pay") {
		t.Fatalf("auto behind a slow link: %+v", *decided)
	}
	if p := decided.Profile; !(p.LinkBytesPerSecond > 0) || p.LinkBytesPerSecond > 4e6 || p.Remote > 60 {
		t.Errorf("profile %+v: want the link probed near 1 MB/s and the nodes' rate estimated within it", *p)
	}
	if remoteOn {
		t.Errorf("auto turned the nodes on behind a link it had probed as too slow")
	}
	for w, ws := range st.Workers {
		if !strings.HasPrefix(w, "client@") && ws.Batches > 0 {
			t.Errorf("node %s delivered %d batches with the nodes off", w, ws.Batches)
		}
	}
}

// TestOffloadAutoChoosesCut: offload auto chooses a cut (FastFlow's
// "which ops"), in a first job of the pipeline from that job's own
// measurements, and in a later one from the profile the first left on
// this host. The pipeline's second op is a 4 ms "decode" that makes each
// element 16 KiB; a random op follows it. The host has one core for the
// pipeline and reads the two nodes over 1 MB/s. Whole elements cross the
// link at about 60 a second, the host alone decodes about 250; shipping
// the elements before the decode (a few bytes each) and decoding in the
// client at the spec's parallelism (4) predicts far more.
//   - The first job profiles the host and probes the link meanwhile, then
//     cuts itself after op 1 while it runs, before any node ships a
//     whole element: the local worker's batches pass through the client's
//     part until it retires, the nodes' splits come cut, and every element
//     arrives once.
//   - The second decides the cut before it creates its job, and a second
//     consumer with auto adopts it.
//
// Both jobs deliver the same random draws for every element: the op after
// the cut is seeded from each element's provenance, wherever it runs.
func TestOffloadAutoChoosesCut(t *testing.T) {
	if testing.Short() {
		t.Skip("reads over an emulated 1 MB/s link")
	}
	c := testcluster.Start(t, 2)
	ctx := context.Background()
	cl := dialSlowLink(t, c, filepath.Join(t.TempDir(), "profiles.json"))
	const n = 2000
	spec := decodeSpec(n, 1000, 4000, 4)
	spec.Ops = slices.Insert(spec.Ops, 2, pipeline.Op{Map: &pipeline.MapOp{Fn: "test_autocache_rand", Parallelism: 2}})

	first, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "cut-first", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	firstDraws, _ := draws(t, first, 120*time.Second, nil)
	st := first.Stats()
	first.Close()
	t.Logf("first job: %+v; workers %+v", *st.Offload, st.Workers)
	if st.Offload.Cut != 1 || !strings.Contains(st.Offload.Reason, "this job's profile") {
		t.Fatalf("the first job did not cut itself after op 1: %+v", *st.Offload)
	}
	if p := st.Offload.Profile; p == nil || !(p.LinkBytesPerSecond > 0) || p.LinkBytesPerSecond > 4e6 || len(p.Ops) != 4 {
		t.Errorf("the first job's profile: %+v, want the ops and a link probed near 1 MB/s", p)
	}
	if st.Workers[firstLocal(st)].Batches == 0 {
		t.Errorf("no batch of the local worker passed through the client's part: %+v", st.Workers)
	}
	if info, _ := jobtest.JobInfo(t, cl, "cut-first"); info.Options.OffloadBoundary != 1 {
		t.Errorf("the first job's offload_boundary is %d, want 1", info.Options.OffloadBoundary)
	}
	checkDraws(t, firstDraws, n)

	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "cut-second", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	// A consumer on another host (no profile, a fast link) joins with auto:
	// it adopts the job's cut rather than being refused for asking none.
	other, err := jobtest.Dial(t, c, 1).Distribute(ctx, spec, client.JobOptions{Name: "cut-second", Sharding: client.Dynamic, Workers: client.AllWorkers, LocalCPUs: 1})
	if err != nil {
		t.Fatalf("a second auto consumer: %v", err)
	}
	defer other.Close()
	if st := other.Stats().Offload; st.Cut != 1 || !strings.Contains(st.Reason, "first consumer chose") {
		t.Errorf("the second consumer did not adopt the job's cut: %+v", *st)
	}
	otherGot := make(chan map[int64][]int64, 1)
	go func() {
		got := map[int64][]int64{}
		defer func() { otherGot <- got }()
		rctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		for {
			b, err := other.Next(rctx)
			if err != nil {
				return // io.EOF; anything else shows as a missing element
			}
			vt, _ := b.Get("value")
			rt, _ := b.Get("r")
			vs, _ := vt.Int64s()
			rs, _ := rt.Int64s()
			for i, v := range vs {
				if i < len(rs) {
					got[v] = append(got[v], rs[i])
				}
			}
		}
	}()
	second, _ := draws(t, it, 120*time.Second, nil)
	for v, rs := range <-otherGot {
		second[v] = append(second[v], rs...)
	}
	checkDraws(t, second, n)
	for v, rs := range second {
		if len(rs) == 1 && len(firstDraws[v]) == 1 && rs[0] != firstDraws[v][0] {
			t.Fatalf("element %d: draw %d in the job cut from the start, %d in the job cut while it ran", v, rs[0], firstDraws[v][0])
		}
	}
	so := it.Stats().Offload
	t.Logf("second job: %+v", *so)
	if so.Cut != 1 || so.Mode != client.OffloadRemote || !strings.Contains(so.Reason, "cut after 1 ops") || so.LocalBatches != 0 {
		t.Fatalf("the second job did not cut after the first op: %+v", *so)
	}
	if info, _ := jobtest.JobInfo(t, cl, "cut-second"); info.Options.OffloadBoundary != 1 {
		t.Errorf("the job's offload_boundary is %d, want 1", info.Options.OffloadBoundary)
	}
}

// firstLocal is the name of the local worker in st's figures ("" when
// none delivered).
func firstLocal(st client.Stats) string {
	for w := range st.Workers {
		if strings.HasPrefix(w, "client@") {
			return w
		}
	}
	return ""
}

// checkDraws checks that every element of [0, n) came once, with one draw.
func checkDraws(t *testing.T, got map[int64][]int64, n int64) {
	t.Helper()
	if int64(len(got)) != n {
		t.Errorf("%d distinct elements delivered, want %d", len(got), n)
	}
	for v := int64(0); v < n; v++ {
		if k := len(got[v]); k != 1 {
			t.Fatalf("element %d delivered %d times", v, k)
		}
	}
}

// dialSlowLink dials node 0 of c from a client whose socket reads over an
// emulated 1 MB/s link with a 64 KiB drop-tail queue, keeping offload
// profiles in profiles ("off": none).
func dialSlowLink(t *testing.T, c *testcluster.Cluster, profiles string) *client.Client {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	fast := transport.FastConfig()
	cl, err := client.Dial(context.Background(), c.Node(0).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadColocation: client.OffloadColocationIgnore,
		PrefetchBatches: 32, OffloadProfiles: profiles, PacketConn: slowlink.New(udp, 1e6, 64<<10)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// decodeSpec is range 0..n-1 in splits of 20, a cost of prefixUs µs per
// element, then a "decode" of decodeUs µs at parallelism par that makes
// each element 16 KiB, batched by 10.
func decodeSpec(n, prefixUs, decodeUs int64, par int) *pipeline.Spec {
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
	spec.Map("cost", fn.Args{"sleep_us": prefixUs}, 1)
	spec.Map("cost", fn.Args{"sleep_us": decodeUs, "out_bytes": 16 << 10}, par)
	spec.Batch(10, false)
	return spec
}
