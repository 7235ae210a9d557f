package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/transport"
)

// This file uses only client APIs that predate it, so that it also builds
// against older trees: copied into one, it measures that tree's defaults
// in the same run as this one's (the "before" of a change).

func init() {
	registerBench(cli.Command{Name: "defaults", Summary: "a plain read of a cost pipeline on 3 and 5 co-located nodes: the default options against every explicit workers × offload choice, elements/s and ratios in one run", Run: benchDefaults})
	registerBench(cli.Command{Name: "localcpu", Summary: "the nodes' CPU-seconds while a reader in another process reads with offload local (its own process makes every batch), and the Raft commands meanwhile", Run: benchLocalCPU})
}

// defaultsConfig is one row of `defaults`: the workers and offload a
// reader asks for ("" leaves the option at its default).
type defaultsConfig struct{ workers, offload string }

func (c defaultsConfig) String() string {
	if c.workers == "" && c.offload == "" {
		return "defaults"
	}
	w, o := c.workers, c.offload
	if w == "" {
		w = "default"
	}
	if o == "" {
		o = "default"
	}
	return w + "/" + o
}

// parseDefaultsConfig reads "defaults" or "WORKERS/OFFLOAD" (WORKERS:
// default, auto, all or a count; OFFLOAD: default, auto, remote, local, a
// fraction or cut=N).
func parseDefaultsConfig(s string) (defaultsConfig, error) {
	s = strings.TrimSpace(s)
	if s == "defaults" {
		return defaultsConfig{}, nil
	}
	w, o, ok := strings.Cut(s, "/")
	if !ok {
		return defaultsConfig{}, fmt.Errorf("config %q: want defaults or WORKERS/OFFLOAD (such as all/remote)", s)
	}
	if w == "default" {
		w = ""
	}
	if o == "default" {
		o = ""
	}
	return defaultsConfig{workers: w, offload: o}, nil
}

// options are the job options of c for a job named name: sharding
// dynamic (the default of `feedmesh read` and of Python's distribute).
func (c defaultsConfig) options(name string) (client.JobOptions, error) {
	o := client.JobOptions{Name: name, Sharding: client.Dynamic, GCAfter: time.Second}
	if c.workers != "" {
		w, err := jobspec.ParseWorkers(c.workers)
		if err != nil {
			return o, err
		}
		o.Workers = w
	}
	if cut, ok := strings.CutPrefix(c.offload, "cut="); ok {
		n, err := strconv.Atoi(cut)
		if err != nil {
			return o, fmt.Errorf("config %s: %w", c, err)
		}
		o.Offload, o.OffloadBoundary = client.OffloadRemote, n
		return o, nil
	}
	o.Offload = c.offload
	return o, nil
}

// defaultsSpec is the plain read's pipeline: a range in splits of
// splitSize, one cost map (per element costUs of busy CPU, or of waiting
// with sleep), a batch.
func defaultsSpec(elements, splitSize, costUs, batch int64, sleep bool) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: elements, SplitSize: splitSize}})
	args := fn.Args{"cpu_us": costUs}
	if sleep {
		args = fn.Args{"sleep_us": costUs}
	}
	s.Map("cost", args, 1)
	s.Batch(batch, false)
	return s
}

func benchDefaults(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("defaults", "[--nodes 3,5] [--reps N] [--configs ...] [--json]", stderr)
	nodes := fs.String("nodes", "3,5", "comma-separated cluster sizes (in-process nodes, on this host: co-located with the reader)")
	reps := fs.Int("reps", 3, "repetitions of every config; the configs take turns within each (the order rotated), medians reported")
	elements := fs.Int64("elements", 100_000, "elements read per run (the dataset's length)")
	costUs := fs.Int64("cost-us", 200, "the map's cost per element (µs)")
	sleep := fs.Bool("sleep", false, "the cost waits instead of burning CPU (emulates nodes with CPUs of their own); default: busy CPU, as a real pipeline on co-located nodes")
	splitSize := fs.Int64("split-size", 100, "elements per split")
	batch := fs.Int64("batch", 32, "elements per batch")
	configs := fs.String("configs", "defaults,all/remote,auto/remote,all/auto,auto/auto,all/local,all/0.5,all/cut=1",
		"comma-separated: defaults (no option set), or WORKERS/OFFLOAD with WORKERS default, auto, all or N and OFFLOAD default, auto, remote, local, a fraction or cut=N")
	localCPUs := fs.Float64("local-cpus", 0, "every config's JobOptions.LocalCPUs: 0 (the default) has the client measure the host's spare CPUs when the job starts, which on a busy machine may find none; 2 stands for an idle 2-core host, the issue's case")
	isolate := fs.Bool("isolate-cache", true, "point the user cache directory ($XDG_CACHE_HOME) at a directory of this run, so that a client that keeps state there by default keeps it for this run only (repeated runs within it see it, as a user's repeated reads would)")
	timeout := fs.Duration("run-timeout", 5*time.Minute, "a run that takes longer fails the benchmark")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: nodes, config, runs, elements_per_second (median), ratio_vs_all_remote (median of the per-repetition ratios), ratio_vs_best (median over the best config's median), samples, serving_nodes, decision")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var cfgs []defaultsConfig
	for _, s := range cli.SplitList(*configs) {
		c, err := parseDefaultsConfig(s)
		if err != nil {
			return err
		}
		if _, err := c.options("x"); err != nil {
			return err
		}
		cfgs = append(cfgs, c)
	}
	if *reps < 1 || len(cfgs) == 0 || *elements < 1 {
		return fmt.Errorf("--reps %d, --configs %q, --elements %d: want at least 1 of each", *reps, *configs, *elements)
	}
	if *isolate {
		dir, err := os.MkdirTemp("", "feedmesh-bench-cache-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		os.Setenv("XDG_CACHE_HOME", dir)
	}
	spec := defaultsSpec(*elements, *splitSize, *costUs, *batch, *sleep)
	var rows []benchRow
	for _, ns := range cli.SplitList(*nodes) {
		n, err := strconv.Atoi(ns)
		if err != nil || n < 1 {
			return fmt.Errorf("--nodes: %q: want counts >= 1", ns)
		}
		r, err := defaultsCluster(ctx, n, spec, cfgs, *reps, *localCPUs, *timeout, stderr)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	return printRows(stdout, *jsonOut, []string{"nodes", "config", "runs", "elements_per_second", "ratio_vs_all_remote", "ratio_vs_best", "serving_nodes", "decision"}, rows)
}

// defaultTimings gives the in-process nodes Raft's default timings (not
// the fast preset's): the nodes share this host's CPUs with the pipeline
// they run, and with the machine's other load, as co-located node
// processes started by hand do.
var defaultTimings = localcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.Raft = raftnode.DefaultConfig() })

// settled waits until the cluster of n nodes has its voters (3, or 5 from
// 5 nodes on) and every node knows the same leader.
func settled(c *localcluster.Cluster, n int) error {
	want := min(n, 3)
	if n >= 5 {
		want = 5
	}
	return c.Wait(2*time.Minute, "the voters and one leader", func() bool {
		_, l := c.Leader()
		if l == nil || len(l.Status().Voters) != want {
			return false
		}
		for _, i := range c.Running() {
			if st := c.Node(i).Status(); st.Leader != l.Status().Name || len(c.Node(i).Members()) != n {
				return false
			}
		}
		return true
	})
}

// defaultsResult is one run of a config.
type defaultsResult struct {
	rate     float64
	serving  int // nodes that delivered
	decision string
	reason   string // the offload's reason, as Stats().Offload gave it
}

// defaultsCluster runs every config reps times on a fresh cluster of n
// nodes, the configs taking turns.
func defaultsCluster(ctx context.Context, n int, spec *pipeline.Spec, cfgs []defaultsConfig, reps int, localCPUs float64, timeout time.Duration, stderr io.Writer) ([]benchRow, error) {
	c, cleanup, err := jobsCluster(ctx, n, defaultTimings)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := settled(c, n); err != nil {
		return nil, err
	}
	fast := transport.FastConfig()
	// The client's options are the defaults (a user's), but for the
	// in-process cluster's transport.
	cl, err := client.Dial(ctx, c.Node(0).Addr(), client.Options{Transport: &fast})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res := map[defaultsConfig][]defaultsResult{}
	seq := 0
	for r := 0; r < reps; r++ {
		for i := range cfgs {
			cfg := cfgs[(i+r)%len(cfgs)]
			seq++
			o, err := cfg.options(fmt.Sprintf("defaults-%d-%d", n, seq))
			if err != nil {
				return nil, err
			}
			o.LocalCPUs = localCPUs
			if err := waitIdle(c); err != nil {
				return nil, err
			}
			rctx, cancel := context.WithTimeout(ctx, timeout)
			x, err := defaultsRun(rctx, cl, spec, o)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%d nodes, %s, repetition %d: %w", n, cfg, r, err)
			}
			fmt.Fprintf(stderr, "%d nodes rep %d %-14s %8.0f elements/s  %d nodes served  %s\n", n, r, cfg, x.rate, x.serving, x.decision)
			if cfg.offload == "" || cfg.offload == "auto" {
				fmt.Fprintf(stderr, "    %.300s\n", x.reason)
			}
			res[cfg] = append(res[cfg], x)
		}
	}
	base := defaultsConfig{workers: "all", offload: "remote"}
	best := 0.0
	for _, cfg := range cfgs {
		if cfg != (defaultsConfig{}) {
			best = max(best, median(rates(res[cfg])))
		}
	}
	var rows []benchRow
	for _, cfg := range cfgs {
		xs := res[cfg]
		m := median(rates(xs))
		row := benchRow{"nodes": n, "config": cfg.String(), "runs": len(xs), "elements_per_second": m, "samples": rates(xs)}
		if b, ok := res[base]; ok {
			var ratios []float64
			for i := range xs {
				ratios = append(ratios, xs[i].rate/b[i].rate)
			}
			row["ratio_vs_all_remote"] = median(ratios)
		}
		if best > 0 {
			row["ratio_vs_best"] = m / best
		}
		var serving []float64
		decisions := map[string]int{}
		for _, x := range xs {
			serving = append(serving, float64(x.serving))
			decisions[x.decision]++
		}
		row["serving_nodes"] = median(serving)
		// The most frequent decision, with how many runs took it.
		top, k := "", 0
		for _, d := range slices.Sorted(mapsKeys(decisions)) {
			if decisions[d] > k {
				top, k = d, decisions[d]
			}
		}
		row["decision"] = fmt.Sprintf("%d/%d: %s", k, len(xs), top)
		rows = append(rows, row)
	}
	return rows, nil
}

func mapsKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func rates(xs []defaultsResult) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x.rate
	}
	return out
}

// defaultsRun reads one job to its end as fast as the iterator gives
// (a plain read: no training step) and measures from Distribute on.
func defaultsRun(ctx context.Context, cl *client.Client, spec *pipeline.Spec, o client.JobOptions) (defaultsResult, error) {
	start := time.Now()
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		return defaultsResult{}, err
	}
	defer it.Close()
	var rows int64
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return defaultsResult{}, err
		}
		rows += b.Rows()
		b.Release()
	}
	el := time.Since(start)
	st := it.Stats()
	x := defaultsResult{rate: float64(rows) / el.Seconds()}
	for name, w := range st.Workers {
		if _, local := jobspec.LocalWorkerOf(name); local || name == client.SuffixWorker || w.Batches == 0 {
			continue
		}
		x.serving++
	}
	if off := st.Offload; off != nil {
		x.decision = off.Mode
		if off.Cut > 0 {
			x.decision += fmt.Sprintf(" cut=%d", off.Cut)
		}
		if off.LocalBatches > 0 {
			x.decision += fmt.Sprintf(" (local share %.2f)", off.LocalShare)
		}
		x.reason = off.Reason
	}
	return x, nil
}

// ---- localcpu

// localCPUReaderFlag, as the first argument of `feedmesh-bench localcpu`,
// makes this process the reader (started by the harness, so that the
// harness's CPU time is its nodes' alone; not listed in the help).
const localCPUReaderFlag = "--reader"

// localCPUReaderCommand builds the reader process's command: this binary
// in the hidden reader mode. A test binary is not feedmesh-bench, so tests
// replace it.
var localCPUReaderCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to start the reader process: %w", err)
	}
	return exec.CommandContext(ctx, exe, append([]string{"localcpu", localCPUReaderFlag}, args...)...), nil
}

// localCPUReport is the reader process's last line.
type localCPUReport struct {
	Rows         int64   `json:"rows"`
	Batches      int64   `json:"batches"`
	LocalBatches int64   `json:"local_batches"`
	Seconds      float64 `json:"seconds"`
	Mode         string  `json:"mode"`
}

func benchLocalCPU(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == localCPUReaderFlag {
		return localCPUReader(ctx, args[1:], stdout)
	}
	fs := prog.NewFlagSet("localcpu", "[--nodes N] [--seconds S] [--reps N] [--json]", stderr)
	nodes := fs.Int("nodes", 3, "in-process nodes (this process: its CPU time is theirs)")
	seconds := fs.Float64("seconds", 20, "the measured window, from the reader's first batch")
	reps := fs.Int("reps", 3, "repetitions (medians reported)")
	costUs := fs.Int64("cost-us", 200, "the map's cost per element (µs of busy CPU in the reader's process)")
	batch := fs.Int64("batch", 32, "elements per batch")
	offloadMode := fs.String("offload", "local", "the reader's offload (local: its process makes every batch)")
	idle := fs.Bool("idle", true, "also measure the nodes' CPU over the same window with no job, before each repetition (what they cost anyway)")
	localCPUs := fs.Float64("local-cpus", 1, "the reader's local CPU budget (JobOptions.LocalCPUs; 0: the spare CPUs it measures)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: nodes, runs, offload, node_cpu_seconds (median, over the window), idle_node_cpu_seconds (the same window without a job), local_batches, node_cpu_ms_per_1000_local_batches, raft_cmds_per_s (all types), raft_cmds_by_type (medians), samples")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if !(*seconds > 0) || *reps < 1 || *nodes < 1 {
		return fmt.Errorf("--seconds %v, --reps %d, --nodes %d: want > 0 and >= 1", *seconds, *reps, *nodes)
	}
	c, cleanup, err := jobsCluster(ctx, *nodes, defaultTimings)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := settled(c, *nodes); err != nil {
		return err
	}
	var cpus, perK, batches, idles []float64
	var cmdRuns []map[string]float64
	for r := 0; r < *reps; r++ {
		if err := waitIdle(c); err != nil {
			return err
		}
		if *idle {
			// The same window with no job: what the nodes cost anyway
			// (gossip, Raft's heartbeats, the leader's upkeep).
			cpu0 := processCPU()
			select {
			case <-time.After(time.Duration(*seconds * float64(time.Second))):
			case <-ctx.Done():
				return ctx.Err()
			}
			idles = append(idles, (processCPU() - cpu0).Seconds())
		}
		cpu, rep, cmds, err := localCPURun(ctx, c, r, *seconds, *costUs, *batch, *offloadMode, *localCPUs)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", r, err)
		}
		cpus = append(cpus, cpu.Seconds())
		batches = append(batches, float64(rep.LocalBatches))
		if rep.LocalBatches > 0 {
			perK = append(perK, cpu.Seconds()*1e3/(float64(rep.LocalBatches)/1000))
		}
		cmdRuns = append(cmdRuns, cmds)
		fmt.Fprintf(stderr, "rep %d: nodes %.2f CPU-s in %.0f s; reader %d batches (%d local, mode %s); raft %.1f cmds/s (%s)\n", r, cpu.Seconds(), *seconds, rep.Batches, rep.LocalBatches, rep.Mode, sumRates(cmds), fmtRates(cmds))
	}
	byType := medianRates(cmdRuns)
	row := benchRow{"nodes": *nodes, "runs": *reps, "offload": *offloadMode, "node_cpu_seconds": median(cpus), "local_batches": median(batches),
		"raft_cmds_per_s": sumRates(byType), "raft_cmds_by_type": byType, "samples": cpus}
	if len(perK) > 0 {
		row["node_cpu_ms_per_1000_local_batches"] = median(perK)
	}
	if len(idles) > 0 {
		row["idle_node_cpu_seconds"] = median(idles)
	}
	return printRows(stdout, *jsonOut, []string{"nodes", "runs", "offload", "node_cpu_seconds", "idle_node_cpu_seconds", "local_batches", "node_cpu_ms_per_1000_local_batches", "raft_cmds_per_s"}, []benchRow{row})
}

// localCPURun starts the reader process and measures this process's CPU
// time and node 0's applied Raft commands over the window, from the
// reader's first batch.
func localCPURun(ctx context.Context, c *localcluster.Cluster, r int, seconds float64, costUs, batch int64, mode string, localCPUs float64) (time.Duration, localCPUReport, map[string]float64, error) {
	job := fmt.Sprintf("localcpu-%d-%d", r, time.Now().UnixNano())
	cmd, err := localCPUReaderCommand(ctx, []string{c.Node(0).Addr(), job, strconv.FormatFloat(seconds, 'g', -1, 64), strconv.FormatInt(costUs, 10), strconv.FormatInt(batch, 10), mode, strconv.FormatFloat(localCPUs, 'g', -1, 64)})
	if err != nil {
		return 0, localCPUReport{}, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, localCPUReport{}, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, localCPUReport{}, nil, err
	}
	exited := make(chan error, 1)
	defer func() {
		// The reader leaves its job once it has reported: wait for it
		// (the next repetition waits for the job's end), then kill it.
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	sc := bufio.NewScanner(out)
	defer func() {
		go func() {
			io.Copy(io.Discard, out)
			exited <- cmd.Wait()
		}()
	}()
	if !sc.Scan() || sc.Text() != "started" {
		return 0, localCPUReport{}, nil, fmt.Errorf("the reader did not start: %q %v", sc.Text(), sc.Err())
	}
	cpu0, cmds0, t0 := processCPU(), c.Node(0).Raft().AppliedCommands(), time.Now()
	if !sc.Scan() {
		return 0, localCPUReport{}, nil, fmt.Errorf("the reader ended without its report: %v", sc.Err())
	}
	cpu, el := processCPU()-cpu0, time.Since(t0)
	cmds := map[string]float64{}
	for t, n := range c.Node(0).Raft().AppliedCommands() {
		if k := n - cmds0[t]; k > 0 {
			cmds[t] = float64(k) / el.Seconds()
		}
	}
	var rep localCPUReport
	if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
		return 0, rep, nil, fmt.Errorf("the reader's report %q: %w", sc.Text(), err)
	}
	return cpu, rep, cmds, nil
}

// localCPUReader is the reader process: ADDR JOB SECONDS COST_US BATCH
// MODE LOCAL_CPUS. It prints "started" after its first batch, reads for SECONDS
// more, prints its report (JSON) and leaves the job.
func localCPUReader(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 7 {
		return fmt.Errorf("reader: want ADDR JOB SECONDS COST_US BATCH MODE LOCAL_CPUS, got %q", args)
	}
	seconds, err1 := strconv.ParseFloat(args[2], 64)
	costUs, err2 := strconv.ParseInt(args[3], 10, 64)
	batch, err3 := strconv.ParseInt(args[4], 10, 64)
	localCPUs, err4 := strconv.ParseFloat(args[6], 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, args[0], client.Options{Transport: &fast})
	if err != nil {
		return err
	}
	defer cl.Close()
	spec := defaultsSpec(100<<20, 100, costUs, batch, false) // more than any window reads
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: args[1], Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: args[5], LocalCPUs: localCPUs, GCAfter: time.Second})
	if err != nil {
		return err
	}
	defer it.Close()
	first, err := it.Next(ctx)
	if err != nil {
		return err
	}
	first.Release()
	fmt.Fprintln(stdout, "started")
	b0, l0 := it.Stats().Batches, localBatches(it.Stats())
	rctx, cancel := context.WithTimeout(ctx, time.Duration(seconds*float64(time.Second)))
	defer cancel()
	t0 := time.Now()
	var rows int64
	for {
		b, err := it.Next(rctx)
		if rctx.Err() != nil {
			break
		}
		if err != nil {
			return err
		}
		rows += b.Rows()
		b.Release()
	}
	st := it.Stats()
	rep := localCPUReport{Rows: rows, Batches: st.Batches - b0, LocalBatches: localBatches(st) - l0, Seconds: time.Since(t0).Seconds()}
	if st.Offload != nil {
		rep.Mode = st.Offload.Mode
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(b))
	return nil
}

func localBatches(st client.Stats) int64 {
	if st.Offload == nil {
		return 0
	}
	return st.Offload.LocalBatches
}
