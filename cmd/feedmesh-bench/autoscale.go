package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
)

func init() {
	registerBench(cli.Command{Name: "autoscale", Summary: "epoch time per fixed worker count, Cachew's autoscaling and a CPU-utilisation policy (Kubernetes HPA at 80 %), for a CPU-bound and a sleep-bound pipeline", Run: benchAutoscale})
}

// autoscaleScenario is one pipeline and consumer of `feedmesh-bench
// autoscale`.
type autoscaleScenario struct {
	name            string
	nodes           int
	cpuUs, sleepUs  int64 // per element
	batch, elements int64
	consumerSleep   time.Duration // the model's work per batch
}

func benchAutoscale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("autoscale", "[--scenarios cpu,sleep] [--json]", stderr)
	scenarios := fs.String("scenarios", "cpu,sleep", "which scenarios to run: cpu (CPU-bound ops, 2 nodes: the machine's cores), sleep (ops that wait, standing in for I/O, 5 nodes)")
	scale := fs.Float64("scale", 1, "multiply each scenario's elements (longer epochs amortize Cachew's ramp from one worker)")
	target := fs.Float64("target-cpu", 0.8, "the utilization policy's target CPU per node")
	policies := fs.String("policies", "fixed,cachew,cachew-warm,utilization", "which policies to run (the ratio to the best fixed count needs fixed): fixed, cachew (the default knobs, from one worker: each run reads a dataset no job has read), cachew-warm (a second job of each cachew run's dataset, which starts where that one converged), tuned (Cachew's policy with the --tuned-* knobs, from one worker), utilization")
	tunedThreshold := fs.Float64("tuned-threshold", 0, "the tuned policy's AutoscaleThreshold (0: the default, 0.03)")
	tunedRevisit := fs.Int("tuned-revisit", 0, "the tuned policy's AutoscaleRevisit, in metrics (0: the default, 10)")
	tunedPause := fs.Int("tuned-pause", -1, "the tuned policy's AutoscalePause, in metrics (-1: none; 0: the default, 2)")
	traceOut := fs.Bool("trace", false, "print each change of the autoscaling decision (time into the epoch, workers serving and wanted, phase, reason) on stderr")
	repeat := fs.Int("repeat", 1, "epochs per fixed count and policy, interleaved; each row reports the median run (on a shared machine, one run each is noisy)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: scenario (cpu, sleep), policy (fixed, cachew, cachew-warm, tuned, utilization), workers (fixed: the count; cachew: the count at the end, utilization: the count chosen), mean_workers, epoch_seconds, worker_seconds (workers serving the job integrated over the epoch), ratio_vs_best_fixed (epoch time), runs and epoch_seconds_runs (with --repeat: the row is the median run)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *repeat < 1 {
		return cli.InputError(fmt.Errorf("--repeat %d: want >= 1", *repeat))
	}
	all := map[string]autoscaleScenario{
		// 150 µs of CPU per element, 4 per batch; the consumer takes a
		// batch every 0.4 ms: one worker almost keeps up on this
		// machine, two do.
		"cpu": {name: "cpu", nodes: 2, cpuUs: 150, batch: 4, elements: 24_000, consumerSleep: 400 * time.Microsecond},
		// 1 ms of waiting per element, 4 per batch (250 batches/s a
		// worker); the consumer takes a batch every 1 ms: 4 workers keep
		// up.
		"sleep": {name: "sleep", nodes: 5, sleepUs: 1000, batch: 4, elements: 24_000, consumerSleep: time.Millisecond},
	}
	var rows []benchRow
	for _, name := range strings.Split(*scenarios, ",") {
		sc, ok := all[name]
		if !ok {
			return fmt.Errorf("unknown scenario %q (want cpu or sleep)", name)
		}
		sc.elements = int64(float64(sc.elements) * *scale)
		var tr io.Writer
		if *traceOut {
			tr = stderr
		}
		run := map[string]bool{}
		for _, p := range strings.Split(*policies, ",") {
			if p != "fixed" && p != "cachew" && p != "cachew-warm" && p != "tuned" && p != "utilization" {
				return cli.InputError(fmt.Errorf("--policies: unknown policy %q (want fixed, cachew, cachew-warm, tuned, utilization)", p))
			}
			run[p] = true
		}
		tuned := client.JobOptions{Workers: client.AutoWorkers, AutoscaleThreshold: *tunedThreshold, AutoscaleRevisit: *tunedRevisit, AutoscalePause: *tunedPause}
		if _, err := (client.JobOptions{Name: "x", Sharding: client.Dynamic, Workers: client.AutoWorkers, AutoscaleThreshold: tuned.AutoscaleThreshold,
			AutoscaleRevisit: tuned.AutoscaleRevisit, AutoscalePause: tuned.AutoscalePause}).Normalize(); err != nil {
			return cli.InputError(fmt.Errorf("--tuned-*: %w", err))
		}
		r, err := runAutoscaleScenario(ctx, sc, *target, *repeat, run, tuned, tr, stderr)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", name, err)
		}
		rows = append(rows, r...)
	}
	return printRows(stdout, *jsonOut, []string{"scenario", "policy", "workers", "mean_workers", "epoch_seconds", "worker_seconds", "ratio_vs_best_fixed", "runs"}, rows)
}

func runAutoscaleScenario(ctx context.Context, sc autoscaleScenario, target float64, repeat int, run map[string]bool, tunedOpts client.JobOptions, trace, stderr io.Writer) ([]benchRow, error) {
	c, cleanup, err := jobsCluster(ctx, sc.nodes)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// specAt is the scenario's dataset number k: the same number of
	// elements, splits and costs, other values. An autoscaling job of a
	// dataset an earlier one converged on starts where that one did, so
	// the policies that climb from one worker read a new one each run.
	specAt := func(k int) *pipeline.Spec {
		s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: int64(k) * sc.elements, Stop: int64(k+1) * sc.elements, SplitSize: 20}})
		s.Cost(sc.cpuUs, sc.sleepUs)
		s.Batch(sc.batch, false)
		return s
	}
	spec, datasets := specAt(0), 0
	job := 0
	epochOf := func(spec *pipeline.Spec, o client.JobOptions) (autoscaleRun, error) {
		job++
		o.Name, o.Sharding, o.Offload = fmt.Sprintf("%s-%d", sc.name, job), client.Dynamic, client.OffloadRemote
		return readEpoch(ctx, c, cl, spec, o, sc.consumerSleep, 0, trace)
	}
	epoch := func(o client.JobOptions) (autoscaleRun, error) { return epochOf(spec, o) }
	// The fixed counts and Cachew's policy, one epoch each per round,
	// interleaved so that the machine's load drifts over all alike.
	fixed := make([][]autoscaleRun, sc.nodes+1)
	var cachew, warm, tuned []autoscaleRun
	for rep := 0; rep < repeat; rep++ {
		for w := 1; w <= sc.nodes && run["fixed"]; w++ {
			r, err := epoch(client.JobOptions{Workers: client.FixedWorkers(w)})
			if err != nil {
				return nil, err
			}
			fixed[w] = append(fixed[w], r)
			fmt.Fprintf(stderr, "  %s fixed %d: %.2f s, %.1f worker-s\n", sc.name, w, r.seconds, r.workerSeconds)
		}
		for _, p := range []struct {
			name string
			o    client.JobOptions
			runs *[]autoscaleRun
		}{{"cachew", client.JobOptions{Workers: client.AutoWorkers}, &cachew}, {"tuned", tunedOpts, &tuned}} {
			if !run[p.name] && !(p.name == "cachew" && run["cachew-warm"]) {
				continue
			}
			datasets++
			fresh := specAt(datasets)
			r, err := epochOf(fresh, p.o)
			if err != nil {
				return nil, err
			}
			*p.runs = append(*p.runs, r)
			fmt.Fprintf(stderr, "  %s %s: %d workers at the end, %.2f s, %.1f worker-s\n", sc.name, p.name, r.lastWorkers, r.seconds, r.workerSeconds)
			if p.name == "cachew" && run["cachew-warm"] {
				r, err := epochOf(fresh, p.o) // starts where the run above converged
				if err != nil {
					return nil, err
				}
				warm = append(warm, r)
				fmt.Fprintf(stderr, "  %s cachew-warm: %d workers at the end, %.2f s, %.1f worker-s\n", sc.name, r.lastWorkers, r.seconds, r.workerSeconds)
			}
		}
	}
	var rows []benchRow
	row := func(policy string, workers int, runs []autoscaleRun) benchRow {
		m := medianRun(runs)
		if workers == 0 {
			workers = m.lastWorkers
		}
		var all []float64
		for _, r := range runs {
			all = append(all, r.seconds)
		}
		return benchRow{"scenario": sc.name, "policy": policy, "workers": workers, "mean_workers": m.workerSeconds / m.seconds,
			"epoch_seconds": m.seconds, "worker_seconds": m.workerSeconds, "runs": len(runs), "epoch_seconds_runs": all}
	}
	for w := 1; w <= sc.nodes && run["fixed"]; w++ {
		rows = append(rows, row("fixed", w, fixed[w]))
	}
	if run["cachew"] {
		rows = append(rows, row("cachew", 0, cachew))
	}
	if run["cachew-warm"] {
		rows = append(rows, row("cachew-warm", 0, warm))
	}
	if run["tuned"] {
		rows = append(rows, row("tuned", 0, tuned))
	}
	if !run["utilization"] {
		return ratios(rows), nil
	}
	// The utilization policy (Kubernetes HPA): from one worker, measure
	// the nodes' CPU for a while and set desired = ceil(w × cpu/target),
	// until it stands.
	w := 1
	for step := 0; step < 5; step++ {
		job++
		p, err := readEpoch(ctx, c, cl, spec, client.JobOptions{Name: fmt.Sprintf("%s-probe-%d", sc.name, job), Sharding: client.Dynamic, Workers: client.FixedWorkers(w), Offload: client.OffloadRemote}, sc.consumerSleep, 1500*time.Millisecond, nil)
		if err != nil {
			return nil, err
		}
		util := p.cpuSeconds / p.seconds / float64(w) // per worker node, a core each
		next := min(max(int(math.Ceil(float64(w)*util/target)), 1), sc.nodes)
		fmt.Fprintf(stderr, "  %s utilization: %d workers, %.0f %% CPU per node → %d\n", sc.name, w, 100*util, next)
		if next == w {
			break
		}
		w = next
	}
	var util []autoscaleRun
	for rep := 0; rep < repeat; rep++ {
		r, err := epoch(client.JobOptions{Workers: client.FixedWorkers(w)})
		if err != nil {
			return nil, err
		}
		util = append(util, r)
		fmt.Fprintf(stderr, "  %s utilization %d: %.2f s, %.1f worker-s\n", sc.name, w, r.seconds, r.workerSeconds)
	}
	rows = append(rows, row("utilization", w, util))
	return ratios(rows), nil
}

// ratios sets each row's ratio_vs_best_fixed (none without fixed rows).
func ratios(rows []benchRow) []benchRow {
	best := math.Inf(1)
	for _, r := range rows {
		if r["policy"] == "fixed" {
			best = min(best, r["epoch_seconds"].(float64))
		}
	}
	for _, r := range rows {
		if !math.IsInf(best, 1) {
			r["ratio_vs_best_fixed"] = r["epoch_seconds"].(float64) / best
		}
	}
	return rows
}

// medianRun is the run of median epoch time (the lower middle of an even
// count).
func medianRun(runs []autoscaleRun) autoscaleRun {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b autoscaleRun) int { return cmp.Compare(a.seconds, b.seconds) })
	return s[(len(s)-1)/2]
}

// autoscaleRun is one epoch (or probe) of `feedmesh-bench autoscale`.
type autoscaleRun struct {
	seconds, workerSeconds, cpuSeconds float64
	lastWorkers                        int
}

// readEpoch reads a job to its end (or for limit, if not 0), the consumer
// sleeping per batch, and integrates the workers serving it (sampled every
// 50 ms from the leader's view) and the process's CPU time.
// With trace, each change of the autoscaling decision is printed there.
func readEpoch(ctx context.Context, c *localcluster.Cluster, cl *client.Client, spec *pipeline.Spec, o client.JobOptions, work, limit time.Duration, trace io.Writer) (autoscaleRun, error) {
	var r autoscaleRun
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		return r, err
	}
	defer it.Close()
	start, cpu0 := time.Now(), processCPU()
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Add(1)
	go func() { // the sampler, joined below
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		var lastChanges int64
		var lastReason string
		for {
			select {
			case <-sctx.Done():
				return
			case now := <-tick.C:
				n, sc := servingWorkers(sctx, c, o.Name)
				if trace != nil && sc != nil && (sc.Changes != lastChanges || sc.Reason != lastReason) {
					lastChanges, lastReason = sc.Changes, sc.Reason
					fmt.Fprintf(trace, "    %s %.2f s: %d serving, %d wanted, %s: %s\n", o.Name, now.Sub(start).Seconds(), n, sc.Wanted, sc.Phase, sc.Reason)
				}
				mu.Lock()
				if n >= 0 {
					r.lastWorkers = n
				}
				r.workerSeconds += float64(max(r.lastWorkers, 0)) * now.Sub(last).Seconds()
				mu.Unlock()
				last = now
			}
		}
	}()
	for limit == 0 || time.Since(start) < limit {
		_, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			stop()
			wg.Wait()
			return r, err
		}
		time.Sleep(work) // the model's work: the consumer's fixed ingestion rate
	}
	r.seconds, r.cpuSeconds = time.Since(start).Seconds(), (processCPU() - cpu0).Seconds()
	stop()
	wg.Wait()
	return r, nil
}

// servingWorkers counts the job's workers neither expired, drained nor
// released, as the leader has them (-1: not known), and returns its
// autoscaling decision (nil: none).
func servingWorkers(ctx context.Context, c *localcluster.Cluster, job string) (int, *api.ScaleInfo) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	jobs, err := c.Node(c.Running()[0]).Jobs(rctx)
	if err != nil {
		return -1, nil
	}
	for _, j := range jobs {
		if j.Name != job {
			continue
		}
		n := 0
		for _, w := range j.Workers {
			if !w.Expired && !w.Drained && !w.Dismissed {
				n++
			}
		}
		return n, j.Scale
	}
	return -1, nil
}
