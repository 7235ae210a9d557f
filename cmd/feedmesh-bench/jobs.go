package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	registerBench(cli.Command{Name: "splits", Summary: "DYNAMIC split leasing through Raft (3 voters) vs an in-memory counter", Run: benchSplits})
	registerBench(cli.Command{Name: "dynamic", Summary: "DYNAMIC vs OFF sharding on a cheap pipeline (range → batch): delivered batches/s", Run: benchDynamic})
	registerBench(cli.Command{Name: "scaleout", Summary: "client throughput with 1…16 in-process workers on a pipeline that sleeps per element", Run: benchScaleout})
	registerBench(cli.Command{Name: "recovery", Summary: "time from a worker's kill to the client's throughput recovering", Run: benchRecovery})
}

// benchRow is the common row of the jobs benchmarks' --json output.
type benchRow map[string]any

func printRows(stdout io.Writer, jsonOut bool, cols []string, rows []benchRow) error {
	if jsonOut {
		return cli.WriteJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			switch v := r[c].(type) {
			case nil:
				fmt.Fprint(tw, "-")
			case float64:
				fmt.Fprintf(tw, "%.3g", v)
			default:
				fmt.Fprint(tw, v)
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func jobsCluster(ctx context.Context, n int, opts ...localcluster.Option) (*localcluster.Cluster, func(), error) {
	dir, err := os.MkdirTemp("", "feedmesh-bench-")
	if err != nil {
		return nil, nil, err
	}
	c, err := localcluster.New(dir, n, append([]localcluster.Option{localcluster.WithStartTimeout(60 * time.Second), localcluster.WithContext(ctx)}, opts...)...)
	cleanup := func() {
		if c != nil {
			c.Close()
		}
		os.RemoveAll(dir)
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return c, cleanup, nil
}

// withData lets the nodes read files under dirs (their data roots) and
// the named object stores.
func withData(dirs []string, stores ...objstore.NamedStore) localcluster.Option {
	return localcluster.WithConfig(func(_ int, c *mesh.Config) {
		c.DataRoots, c.ObjectStores = dirs, stores
	})
}

func benchClient(ctx context.Context, c *localcluster.Cluster, i int) (*client.Client, error) {
	fast := transport.FastConfig()
	return client.Dial(ctx, c.Node(i).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 200 * time.Millisecond, Window: 8, PrefetchBatches: 64})
}

// ---- splits

func benchSplits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("splits", "[--seconds S] [--workers N] [--per-lease N] [--json]", stderr)
	seconds := fs.Float64("seconds", 3, "how long each path is measured")
	workers := fs.Int("workers", 32, "concurrent leasing workers")
	perLease := fs.Int("per-lease", 16, "splits asked for per lease")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: path, workers, per_lease, leases_per_s, splits_per_s, ratio_vs_memory")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	d := time.Duration(*seconds * float64(time.Second))
	fmt.Fprintf(stderr, "in-memory splits.DynamicState (one mutex), %d workers, %s …\n", *workers, d)
	memLeases := memLeaseRate(*workers, *perLease, d)
	fmt.Fprintf(stderr, "Raft, 3 voters, raft-boltdb with fsync, %d workers, %s …\n", *workers, d)
	raftLeases, err := raftLeaseRate(ctx, *workers, *perLease, d)
	if err != nil {
		return err
	}
	rows := []benchRow{
		{"path": "memory", "workers": *workers, "per_lease": *perLease, "leases_per_s": memLeases, "splits_per_s": memLeases * float64(*perLease), "ratio_vs_memory": 1.0},
		{"path": "raft-3-voters", "workers": *workers, "per_lease": *perLease, "leases_per_s": raftLeases, "splits_per_s": raftLeases * float64(*perLease), "ratio_vs_memory": raftLeases / memLeases},
	}
	return printRows(stdout, *jsonOut, []string{"path", "workers", "per_lease", "leases_per_s", "splits_per_s", "ratio_vs_memory"}, rows)
}

// leaseRate runs workers goroutines that each call lease (one lease and its
// finish report) until d has passed, and returns leases per second; the
// first error stops the measurement.
func leaseRate(workers int, d time.Duration, lease func(worker string, req uint64) error) (float64, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		name := "w" + strconv.Itoa(w)
		wg.Go(func() {
			for req := uint64(1); time.Now().Before(deadline); req++ {
				if err := lease(name, req); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return float64(n.Load()) / d.Seconds(), nil
}

func memLeaseRate(workers, perLease int, d time.Duration) float64 {
	st := splits.NewDynamic(1<<40, 1)
	var mu sync.Mutex
	rate, _ := leaseRate(workers, d, func(name string, req uint64) error {
		mu.Lock()
		defer mu.Unlock()
		l := st.Lease(name, req, perLease)
		return st.Finish(name, l.Epoch, l.Splits)
	})
	return rate
}

func raftLeaseRate(ctx context.Context, workers, perLease int, d time.Duration) (float64, error) {
	c, cleanup, err := jobsCluster(ctx, 3)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	_, leader := c.Leader()
	r := leader.Raft()
	apply := func(cmd fsm.Command) (raftnode.Result, error) {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return r.Apply(actx, cmd)
	}
	if _, err := apply(fsm.NewRegisterDataset(fsm.Dataset{Fingerprint: "bench", Spec: []byte{0xa0}, NumSplits: 1 << 40})); err != nil {
		return 0, err
	}
	// An at-most-once DYNAMIC job of one epoch, as a node proposes it.
	n, err := jobspec.Options{Name: "bench", Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Workers: jobspec.AllWorkers}.Normalize()
	if err != nil {
		return 0, err
	}
	if _, err := apply(fsm.NewCreateJob(fsm.Create{Name: n.Name(), Fingerprint: "bench", Options: n.Job()})); err != nil {
		return 0, err
	}
	for w := 0; w < workers; w++ {
		if _, err := apply(fsm.NewAssignTask("bench", "w"+strconv.Itoa(w))); err != nil {
			return 0, err
		}
	}
	return leaseRate(workers, d, func(name string, req uint64) error {
		res, err := apply(fsm.NewLeaseSplits("bench", name, req, perLease))
		if err != nil {
			return err
		}
		l := res.Value.(splits.Lease)
		_, err = apply(fsm.NewFinishSplits("bench", name, l.Epoch, l.Splits))
		return err
	})
}

// waitIdle waits until the previous job is garbage-collected and no node
// runs a task, so runs do not share the CPU with leftovers.
func waitIdle(c *localcluster.Cluster) error {
	defer func() {
		if os.Getenv("FEEDMESH_DUMP") != "" {
			f, _ := os.Create(os.Getenv("FEEDMESH_DUMP"))
			pprof.Lookup("goroutine").WriteTo(f, 2)
			f.Close()
		}
	}()
	return c.Wait(30*time.Second, "tasks of finished jobs to stop", func() bool {
		for _, i := range c.Running() {
			if len(c.Node(i).Tasks()) > 0 {
				return false
			}
		}
		return true
	})
}

func drainAll(ctx context.Context, it *client.Iterator) error {
	for {
		_, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ---- scale-out

func sleepySpec(elements, splitSize, sleepUs, batch int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: elements, SplitSize: splitSize}})
	s.Cost(0, sleepUs)
	s.Batch(batch, false)
	return s
}

func benchScaleout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("scaleout", "[--workers 1,2,4,8,16] [--seconds S] [--json]", stderr)
	workersFlag := fs.String("workers", "1,2,4,8,16", "worker counts to measure")
	seconds := fs.Float64("seconds", 3, "measurement window per worker count (after 0.5 s of warm-up)")
	sleepUs := fs.Int64("sleep-us", 2000, "time each element spends in the cost op (waiting, not CPU)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: workers, elements_per_s, ratio_vs_1, ideal, cpu_percent (the process's CPU time, cluster and client, over the window: 200 is both cores of this machine), lease_wait and client_wait (the share of the workers' time in the window their productions waited for a lease with no split queued, and for the client to take batches), raft_cmds_per_s (by type)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of each measured window to PREFIX-<workers>.pprof")
	deliveryFlag := fs.String("delivery", client.ExactlyOnce, "exactly-once, at-most-once, or both (each worker count read both ways in turn; rows gain delivery and, for exactly-once, ratio_vs_at_most_once)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var deliveries []string
	switch *deliveryFlag {
	case client.ExactlyOnce, client.AtMostOnce:
		deliveries = []string{*deliveryFlag}
	case "both":
		deliveries = []string{client.ExactlyOnce, client.AtMostOnce}
	default:
		return fmt.Errorf("--delivery: %q is not exactly-once, at-most-once or both", *deliveryFlag)
	}
	var counts []int
	maxW := 0
	for _, p := range cli.SplitList(*workersFlag) {
		k, err := strconv.Atoi(p)
		if err != nil || k < 1 || k > 64 {
			return fmt.Errorf("--workers: %q is not a count from 1 to 64", p)
		}
		counts = append(counts, k)
		maxW = max(maxW, k)
	}
	fmt.Fprintf(stderr, "starting %d in-process nodes …\n", maxW)
	c, cleanup, err := jobsCluster(ctx, maxW)
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	window := time.Duration(*seconds * float64(time.Second))
	var rows []benchRow
	base := map[string]float64{}
	for _, k := range counts {
		var eoRow benchRow
		for _, delivery := range deliveries {
			name := strconv.Itoa(k)
			if len(deliveries) > 1 {
				name += "-" + delivery
			}
			w := &dynamicWindow{c: c, cpuProfile: *cpuProfile, name: name}
			job := fmt.Sprintf("scale-%d-%s", k, delivery)
			var lease0, offer0, leaseW, offerW time.Duration
			hooks := &windowHooks{
				start: func() { w.start(); lease0, offer0 = taskWaits(c, job) },
				end:   func() { w.end(); l, o := taskWaits(c, job); leaseW, offerW = l-lease0, o-offer0 },
			}
			rate, err := steadyRate(ctx, c, cl, sleepySpec(1<<24, 64, *sleepUs, 16),
				client.JobOptions{Name: job, Sharding: client.Dynamic, Offload: client.OffloadRemote, MaxWorkers: k, Delivery: delivery}, window, hooks)
			if err != nil {
				return err
			}
			if w.err != nil {
				return w.err
			}
			cpu := 100 * w.cpu.Seconds() / w.elapsed.Seconds()
			// The share of the workers' time spent waiting for a lease, and
			// for the client to take batches.
			workerTime := float64(k) * w.elapsed.Seconds()
			leaseFrac, offerFrac := leaseW.Seconds()/workerTime, offerW.Seconds()/workerTime
			if base[delivery] == 0 {
				base[delivery] = rate / float64(k)
			}
			ideal := float64(k) * 1e6 / float64(*sleepUs)
			fmt.Fprintf(stderr, "  %2d workers, %s: %8.0f elements/s (ideal %.0f)  CPU %3.0f %%  waiting: for leases %.1f %%, for the client %.1f %%  raft %s\n", k, delivery, rate, ideal, cpu, 100*leaseFrac, 100*offerFrac, fmtRates(w.cmdRates))
			row := benchRow{"workers": k, "elements_per_s": rate, "ratio_vs_1": rate / base[delivery], "ideal": ideal, "cpu_percent": cpu,
				"lease_wait": leaseFrac, "client_wait": offerFrac, "raft_cmds_per_s": w.cmdRates}
			if len(deliveries) > 1 {
				row["delivery"] = delivery
				switch delivery {
				case client.ExactlyOnce:
					eoRow = row
				case client.AtMostOnce:
					eoRow["ratio_vs_at_most_once"] = eoRow["elements_per_s"].(float64) / rate
				}
			}
			rows = append(rows, row)
		}
	}
	cols := []string{"workers", "elements_per_s", "ratio_vs_1", "ideal", "cpu_percent", "lease_wait", "client_wait"}
	if len(deliveries) > 1 {
		cols = append([]string{"delivery"}, append(cols, "ratio_vs_at_most_once")...)
	}
	return printRows(stdout, *jsonOut, cols, rows)
}

// taskWaits sums, over the running nodes' tasks of job, the time their
// productions waited for a lease and for their consumers.
func taskWaits(c *localcluster.Cluster, job string) (lease, offer time.Duration) {
	for _, i := range c.Running() {
		for _, t := range c.Node(i).Tasks() {
			if t.Job == job {
				lease += t.LeaseWait
				offer += t.OfferWait
			}
		}
	}
	return lease, offer
}

// steadyRate runs one job, measures its rows/s over window after 0.5 s of
// warm-up, closes it and waits until its tasks are gone, so the next
// measurement has the machine to itself.
// hooks, if not nil, are called as the window starts and ends.
func steadyRate(ctx context.Context, c *localcluster.Cluster, cl *client.Client, spec *pipeline.Spec, o client.JobOptions, window time.Duration, hooks *windowHooks) (float64, error) {
	o.GCAfter = 200 * time.Millisecond
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		return 0, err
	}
	rate, err := rowsPerSecond(ctx, it, 500*time.Millisecond, window, hooks)
	it.Close()
	if err != nil {
		return 0, err
	}
	return rate, waitIdle(c)
}

// windowHooks are called, if not nil, when a measured window starts and
// ends (profiles, counters of the window alone).
type windowHooks struct{ start, end func() }

// rowsPerSecond reads for warm+window and returns the rows/s of the window.
func rowsPerSecond(ctx context.Context, it *client.Iterator, warm, window time.Duration, hooks *windowHooks) (float64, error) {
	start := time.Now()
	var r0 int64
	var t0 time.Time
	for {
		if _, err := it.Next(ctx); err != nil {
			return 0, err
		}
		now := time.Now()
		if t0.IsZero() && now.Sub(start) >= warm {
			if hooks != nil && hooks.start != nil {
				hooks.start()
				now = time.Now()
			}
			t0, r0 = now, it.Stats().Rows
		}
		if !t0.IsZero() && now.Sub(t0) >= window {
			rate := float64(it.Stats().Rows-r0) / now.Sub(t0).Seconds()
			if hooks != nil && hooks.end != nil {
				hooks.end()
			}
			return rate, nil
		}
	}
}

// ---- recovery

func benchRecovery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("recovery", "[--workers N] [--runs N] [--json]", stderr)
	workers := fs.Int("workers", 4, "workers (in-process nodes); one of them, not the one the client dialed, is killed")
	runs := fs.Int("runs", 3, "kills measured (a fresh cluster each)")
	sleepUs := fs.Int64("sleep-us", 2000, "time each element spends in the cost op")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: run, before_per_s, target_per_s, recovery_ms, dip_per_s, orphaned_ms (kill → the dead worker's unsettled splits orphaned: its expiry committed), released_ms (kill → the last of them leased again), requeued (how many)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var rows []benchRow
	var recs []time.Duration
	var orphaned, released []float64
	for r := 0; r < *runs; r++ {
		row, rec, err := recoveryRun(ctx, *workers, *sleepUs, stderr)
		if err != nil {
			return err
		}
		row["run"] = r
		rows = append(rows, row)
		recs = append(recs, rec)
		orphaned = append(orphaned, row["orphaned_ms"].(float64))
		released = append(released, row["released_ms"].(float64))
	}
	rows = append(rows, benchRow{"run": "median", "recovery_ms": ms(median(recs)), "orphaned_ms": median(orphaned), "released_ms": median(released)})
	return printRows(stdout, *jsonOut, []string{"run", "before_per_s", "target_per_s", "dip_per_s", "recovery_ms", "orphaned_ms", "released_ms", "requeued"}, rows)
}

// recoveryRun measures throughput in 100 ms buckets; after 2 s it kills a
// worker; recovery is the time until a 300 ms window reaches 90 % of the
// rate the surviving workers delivered before the kill.
func recoveryRun(ctx context.Context, workers int, sleepUs int64, stderr io.Writer) (benchRow, time.Duration, error) {
	c, cleanup, err := jobsCluster(ctx, workers, localcluster.WithConfig(func(i int, cfg *mesh.Config) {}))
	if err != nil {
		return nil, 0, err
	}
	defer cleanup()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	it, err := cl.Distribute(ctx, sleepySpec(1<<24, 64, sleepUs, 16), client.JobOptions{Name: "recovery", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	victim := workers - 1
	// Warm up, then measure the survivors' rate before the kill.
	if _, err := rowsPerSecond(ctx, it, 0, time.Second, nil); err != nil {
		return nil, 0, err
	}
	survivors := func() int64 {
		var n int64
		for w, s := range it.Stats().Workers {
			if w != c.Name(victim) {
				n += s.Rows
			}
		}
		return n
	}
	s0, t0 := survivors(), time.Now()
	if _, err := rowsPerSecond(ctx, it, 0, time.Second, nil); err != nil {
		return nil, 0, err
	}
	before := float64(survivors()-s0) / time.Since(t0).Seconds()
	target := 0.9 * before
	killed := time.Now()
	c.Kill(victim)
	rw := watchReleases(ctx, cl, "recovery", killed, 10*time.Millisecond)
	defer func() { rw.cancel(); <-rw.done }()
	type sample struct {
		at   time.Time
		rows int64
	}
	var samples []sample
	dip := before
	for {
		if _, err := it.Next(ctx); err != nil {
			return nil, 0, err
		}
		now := time.Now()
		samples = append(samples, sample{now, it.Stats().Rows})
		for len(samples) > 1 && now.Sub(samples[0].at) > 300*time.Millisecond {
			samples = samples[1:]
		}
		if now.Sub(killed) >= 300*time.Millisecond && len(samples) > 1 {
			rate := float64(samples[len(samples)-1].rows-samples[0].rows) / samples[len(samples)-1].at.Sub(samples[0].at).Seconds()
			dip = min(dip, rate)
			if rate >= target {
				rec := now.Sub(killed) - 300*time.Millisecond // the window that proved it began then
				rec = max(rec, 0)
				fmt.Fprintf(stderr, "  kill of %s: survivors' rate %.0f/s before, lowest window %.0f/s, recovered after %s\n", c.Name(victim), before, dip, rec.Round(time.Millisecond))
				// The reading goes on meanwhile: the survivors' streams
				// stay open while the job leases the dead one's splits.
				orphaned, released, requeued, err := rw.wait(30 * time.Second)
				if err != nil {
					return nil, 0, err
				}
				fmt.Fprintf(stderr, "  its splits orphaned after %s, the last of %d leased again after %s\n", orphaned.Round(time.Millisecond), requeued, released.Round(time.Millisecond))
				return benchRow{"before_per_s": before, "target_per_s": target, "dip_per_s": dip, "recovery_ms": ms(rec),
					"orphaned_ms": ms(orphaned), "released_ms": ms(released), "requeued": requeued}, rec, nil
			}
		}
		if now.Sub(killed) > 30*time.Second {
			return nil, 0, fmt.Errorf("throughput did not recover within 30 s")
		}
	}
}
