package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/bench/transportbench"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	registerBench(cli.Command{Name: "fanin", Summary: "one client process reading ~1 MiB batches from 1…8 in-process workers: MB/s into it, its CPU-s/GB, its RSS vs its buffer bound", Run: benchFanin})
}

// faninClientFlag, as the first argument of `feedmesh-bench fanin`, makes
// this process the measured client (started by the harness, so that its CPU
// time and memory are its own; not listed in the help).
const faninClientFlag = "--client"

// faninClientCommand builds the client process's command: this binary in
// the hidden client mode. A test binary is not feedmesh, so tests replace it.
var faninClientCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable to start the client process: %w", err)
	}
	return exec.CommandContext(ctx, exe, append([]string{"fanin", faninClientFlag}, args...)...), nil
}

// faninConfig is what the harness and its client process agree on.
type faninConfig struct {
	seconds    float64
	warmup     float64
	stepMs     float64
	gogc       int  // the client's GC percent; 0 leaves Go's default (GOGC)
	release    bool // the client calls Batch.Release after each batch
	batchBytes int64
	rows       int64
	sharding   string
	opts       client.Options // Window, StreamsPerWorker, PrefetchBatches, PrefetchBytes
}

// Limits of the flags: a batch must fit in one frame of the in-process
// nodes' transport (transport.FastConfig: 64 MiB), header included.
const (
	faninMaxBatchBytes = 32 << 20
	faninMaxSeconds    = 600
	faninMaxWorkers    = 64
	// faninBatches is the dataset's length in batches: far more than any
	// window reads (4 Mi batches of 1 MiB take over an hour at 1 GB/s).
	faninBatches = 1 << 22
	// faninSplitBatches is a split's length in batches (few leases under
	// DYNAMIC, few splits to enumerate under OFF).
	faninSplitBatches = 256
)

// addFaninFlags defines the flags the harness passes on to its client.
func addFaninFlags(fs *flag.FlagSet) func() (faninConfig, error) {
	seconds := fs.Float64("seconds", 3, "measurement window per worker count")
	warmup := fs.Float64("warmup", 0.5, "seconds read before the window, once every worker has delivered a batch (buffers fill, the new cluster settles)")
	stepMs := fs.Float64("step-ms", 0, "milliseconds the client waits after each batch, standing in for a training step; a client slower than its workers keeps its buffers full, the worst case for memory")
	gogc := fs.Int("client-gogc", 0, "GC percent of the client process (runtime/debug.SetGCPercent); 0 leaves Go's default (100, or $GOGC)")
	release := fs.Bool("release", false, "the client calls Batch.Release after each batch (and its step), so that its receive buffer is reused (client.Options.RecycleBytes, default 64 MiB of free buffers)")
	batchBytes := fs.Int64("batch-bytes", 1<<20, "bytes of record data per batch (the batch also carries ids and offsets, 16 bytes a row)")
	rows := fs.Int64("rows", 16, "rows per batch: synthetic records of batch-bytes/rows random bytes each")
	sharding := fs.String("sharding", string(client.Off), "off (every worker reads the whole dataset) or dynamic (workers lease splits through Raft)")
	window := fs.Int("window", 4, "client.Options.Window: credit (batches) per worker stream")
	streams := fs.Int("streams-per-worker", 2, "client.Options.StreamsPerWorker")
	prefetchBatches := fs.Int("prefetch-batches", 16, "client.Options.PrefetchBatches: batches buffered across workers")
	prefetchBytes := fs.Int64("prefetch-bytes", 256<<20, "client.Options.PrefetchBytes: bytes of buffered batches")
	return func() (faninConfig, error) {
		c := faninConfig{seconds: *seconds, warmup: *warmup, stepMs: *stepMs, gogc: *gogc, release: *release, batchBytes: *batchBytes, rows: *rows, sharding: *sharding}
		c.opts = client.Options{Window: *window, StreamsPerWorker: *streams, PrefetchBatches: *prefetchBatches, PrefetchBytes: *prefetchBytes}
		switch {
		case !(c.seconds > 0) || c.seconds > faninMaxSeconds:
			return c, fmt.Errorf("--seconds: %g is not in (0, %d]", c.seconds, faninMaxSeconds)
		case !(c.warmup >= 0) || c.warmup > faninMaxSeconds:
			return c, fmt.Errorf("--warmup: %g is not in [0, %d]", c.warmup, faninMaxSeconds)
		case !(c.stepMs >= 0) || c.stepMs > 10000:
			return c, fmt.Errorf("--step-ms: %g is not in [0, 10000]", c.stepMs)
		case c.gogc < 0 || c.gogc > 10000:
			return c, fmt.Errorf("--client-gogc: %d is not in [0, 10000]", c.gogc)
		case c.batchBytes < 1 || c.batchBytes > faninMaxBatchBytes:
			return c, fmt.Errorf("--batch-bytes: %d is not in [1, %d] (a batch must fit in one transport frame)", c.batchBytes, faninMaxBatchBytes)
		case c.rows < 1 || c.rows > c.batchBytes || c.rows > 4096:
			return c, fmt.Errorf("--rows: %d is not in [1, min(4096, --batch-bytes)]", c.rows)
		case c.sharding != string(client.Off) && c.sharding != string(client.Dynamic):
			return c, fmt.Errorf("--sharding: %q is not off or dynamic", c.sharding)
		case *window < 1 || *window > 1024:
			return c, fmt.Errorf("--window: %d is not in [1, 1024]", *window)
		case *streams < 1 || *streams > 16:
			return c, fmt.Errorf("--streams-per-worker: %d is not in [1, 16]", *streams)
		case *prefetchBatches < 1 || *prefetchBatches > 1<<16:
			return c, fmt.Errorf("--prefetch-batches: %d is not in [1, 65536]", *prefetchBatches)
		case *prefetchBytes < 1:
			return c, fmt.Errorf("--prefetch-bytes: %d must be > 0", *prefetchBytes)
		}
		return c, nil
	}
}

// args renders c as the client process's flags.
func (c faninConfig) args() []string {
	return []string{
		"--seconds", strconv.FormatFloat(c.seconds, 'g', -1, 64),
		"--warmup", strconv.FormatFloat(c.warmup, 'g', -1, 64),
		"--step-ms", strconv.FormatFloat(c.stepMs, 'g', -1, 64),
		"--client-gogc", strconv.Itoa(c.gogc),
		"--release=" + strconv.FormatBool(c.release),
		"--batch-bytes", strconv.FormatInt(c.batchBytes, 10),
		"--rows", strconv.FormatInt(c.rows, 10),
		"--sharding", c.sharding,
		"--window", strconv.Itoa(c.opts.Window),
		"--streams-per-worker", strconv.Itoa(c.opts.StreamsPerWorker),
		"--prefetch-batches", strconv.Itoa(c.opts.PrefetchBatches),
		"--prefetch-bytes", strconv.FormatInt(c.opts.PrefetchBytes, 10),
	}
}

// spec is the cheap pipeline: synthetic records (random bytes, generated
// with a PCG per element: no I/O, no decoding) batched rows at a time.
func (c faninConfig) spec() *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{
		Kind: "records", Count: faninBatches * c.rows, SplitSize: faninSplitBatches * c.rows,
		RecordBytes: int(c.batchBytes / c.rows),
	}))
	return s.Batch(c.rows, false)
}

// faninResult is the client process's report (one JSON line on stdout).
type faninResult struct {
	Workers          int              `json:"workers"`
	Bytes            int64            `json:"bytes"`
	Batches          int64            `json:"batches"`
	Seconds          float64          `json:"seconds"`
	CPUSeconds       float64          `json:"cpu_s"`
	FirstBatchesMs   float64          `json:"first_batches_ms"`
	PeakRSSBytes     int64            `json:"peak_rss_bytes"`
	RSSBeforeBytes   int64            `json:"rss_before_bytes"`
	RSSMaxBytes      int64            `json:"rss_max_bytes"`
	RSSMedianBytes   int64            `json:"rss_median_bytes"`
	RSSSamples       int              `json:"rss_samples"`
	HeapMaxBytes     int64            `json:"heap_max_bytes"`
	PoolMaxBytes     int64            `json:"pool_max_bytes"`
	BoundBytes       int64            `json:"bound_bytes"`
	PerWorkerBatches map[string]int64 `json:"per_worker_batches"`
}

// faninStartLine is what the client prints when its window starts, so the
// harness can measure its own (the workers') CPU over the same window.
const faninStartLine = `{"window":"start"}`

func benchFanin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == faninClientFlag {
		return faninClient(ctx, args[1:], stdout, stderr)
	}
	fs := prog.NewFlagSet("fanin", "[--workers 1,2,4,8] [--seconds S] [--batch-bytes N] [--json]", stderr)
	workersFlag := fs.String("workers", "1,2,4,8", "worker counts k to measure (a fresh in-process cluster of k nodes each)")
	config := addFaninFlags(fs)
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: workers, mb_per_s, batches_per_s, client_cpu_s_per_gb, workers_cpu_s_per_gb, rss_before_mb, rss_max_mb, rss_median_mb, peak_rss_mb, heap_max_mb, pool_max_mb, release, bound_mb, rss_minus_bound_mb, mean_batch_bytes, step_ms, seconds, serving, per_worker_batches (memory in MiB, throughput in 10^6 bytes/s, CPU per 10^9 bytes)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: feedmesh-bench fanin [flags]

For each worker count k: starts k in-process nodes (memberlist, Raft, QUIC on loopback), then one
client in its own process (this binary again) that runs a job of synthetic records batched to about
--batch-bytes (OFF sharding by default: every worker serves it), waits until every worker has
delivered a batch, reads for --warmup, then for --seconds. Reported: MB/s and batches/s into the
client, its CPU-s/GB and the workers' process's (getrusage over the window), the client's RSS before
the job and sampled every 100 ms in the window (/proc/self/status), its Go heap (live and unswept
objects), and the bound the client.Options put on its buffered batch bytes (bound_mb: budget +
per-stream credit + the batch in hand; see client.Options.BufferBound). The bound is on live bytes: Go's
collector lets the heap grow about GOGC % past them, so RSS can approach the RSS before the job plus
(1 + GOGC/100) × bound when the buffers stay full (--step-ms makes the client the slow side).
The workers and the client share the machine's cores. Progress goes to stderr.

Flags:`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config()
	if err != nil {
		return err
	}
	var counts []int
	for _, p := range cli.SplitList(*workersFlag) {
		k, err := strconv.Atoi(p)
		if err != nil || k < 1 || k > faninMaxWorkers {
			return fmt.Errorf("--workers: %q is not a count from 1 to %d", p, faninMaxWorkers)
		}
		counts = append(counts, k)
	}
	if len(counts) == 0 {
		return errors.New("--workers: no worker counts given")
	}
	var rows []benchRow
	for _, k := range counts {
		fmt.Fprintf(stderr, "k=%d: starting %d in-process nodes …\n", k, k)
		row, err := faninPoint(ctx, cfg, k, stderr)
		if err != nil {
			return fmt.Errorf("%d workers: %w", k, err)
		}
		fmt.Fprintf(stderr, "k=%d: %.0f MB/s, %.2f client CPU-s/GB, RSS max %.0f MiB (bound %.0f MiB), batches per worker %v\n",
			k, row["mb_per_s"], row["client_cpu_s_per_gb"], row["rss_max_mb"], row["bound_mb"], row["per_worker_batches"])
		rows = append(rows, row)
	}
	if *jsonOut {
		return cli.WriteJSON(stdout, rows)
	}
	return writeFaninTable(stdout, rows)
}

// faninPoint measures one worker count on a fresh cluster.
func faninPoint(ctx context.Context, cfg faninConfig, k int, stderr io.Writer) (benchRow, error) {
	c, cleanup, err := jobsCluster(ctx, k)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--addr", c.Node(0).Addr(), "--workers", strconv.Itoa(k), "--job", fmt.Sprintf("fanin-%d", k)}, cfg.args()...)
	res, workersCPU, err := runFaninClient(ctx, args, stderr)
	if err == nil {
		// A quiet Raft log before the nodes are killed: see closeFaninCluster.
		faninQuiesce(c, stderr)
	}
	closeFaninCluster(cleanup, stderr)
	if err != nil {
		return nil, err
	}
	const mib = 1 << 20
	gb := float64(res.Bytes) / 1e9
	serving := 0
	for _, n := range res.PerWorkerBatches {
		if n > 0 {
			serving++
		}
	}
	return benchRow{
		"workers": k, "mb_per_s": float64(res.Bytes) / res.Seconds / 1e6, "batches_per_s": float64(res.Batches) / res.Seconds,
		"client_cpu_s_per_gb": res.CPUSeconds / gb, "workers_cpu_s_per_gb": workersCPU / gb,
		"rss_max_mb": float64(res.RSSMaxBytes) / mib, "rss_median_mb": float64(res.RSSMedianBytes) / mib,
		"peak_rss_mb": float64(res.PeakRSSBytes) / mib, "heap_max_mb": float64(res.HeapMaxBytes) / mib, "pool_max_mb": float64(res.PoolMaxBytes) / mib, "release": cfg.release,
		"bound_mb": float64(res.BoundBytes) / mib, "rss_before_mb": float64(res.RSSBeforeBytes) / mib, "step_ms": cfg.stepMs, "rss_minus_bound_mb": float64(res.RSSMaxBytes-res.BoundBytes) / mib,
		"mean_batch_bytes": float64(res.Bytes) / float64(res.Batches), "seconds": res.Seconds,
		"serving": serving, "per_worker_batches": sortedCounts(res.PerWorkerBatches),
	}, nil
}

// faninQuiesce waits (at most 10 s) until the nodes run no task: the
// client detached, the job was garbage-collected (GCAfter 1 s) and its tasks
// stopped. Only a warning if they do not: the measurement is done.
func faninQuiesce(c *localcluster.Cluster, stderr io.Writer) {
	busy := func() []string {
		var out []string
		for _, i := range c.Running() {
			for _, t := range c.Node(i).Tasks() {
				out = append(out, fmt.Sprintf("%s: %+v", c.Name(i), t))
			}
		}
		return out
	}
	if err := c.Wait(10*time.Second, "tasks of the finished job to stop", func() bool { return len(busy()) == 0 }); err != nil {
		fmt.Fprintf(stderr, "warning: %v; still running: %v\n", err, busy())
	}
}

// faninCloseTimeout bounds the wait for a cluster's nodes to stop.
const faninCloseTimeout = 30 * time.Second

// closeFaninCluster stops the cluster, waiting at most faninCloseTimeout.
// Killing a Raft leader's followers while it replicates can deadlock
// hashicorp/raft's pipelined replication (netPipeline.AppendEntries parks
// on inprogressCh while decodeResponses parks on doneCh, whose reader has
// returned; Raft.Shutdown then waits for ever; seen here once at 8 nodes).
// Waiting for the job's tasks to end first makes that rarer (no new log
// entries, no pipelined sends); if it happens anyway the stuck nodes are
// abandoned, idle, with a warning, so that the benchmark can go on.
func closeFaninCluster(cleanup func(), stderr io.Writer) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cleanup()
	}()
	select {
	case <-done:
	case <-time.After(faninCloseTimeout):
		fmt.Fprintf(stderr, "warning: the in-process nodes did not stop within %s (a Raft shutdown hang, see closeFaninCluster); abandoning them and their temporary directory\n", faninCloseTimeout)
	}
}

// sortedCounts lists per-worker counts in worker-name order.
func sortedCounts(m map[string]int64) []int64 {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]int64, len(names))
	for i, n := range names {
		out[i] = m[n]
	}
	return out
}

// runFaninClient runs the client process to the end and returns its report
// and this process's (the workers') CPU seconds over the client's window.
func runFaninClient(ctx context.Context, args []string, stderr io.Writer) (faninResult, float64, error) {
	cmd, err := faninClientCommand(ctx, args)
	if err != nil {
		return faninResult{}, 0, err
	}
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return faninResult{}, 0, err
	}
	if err := cmd.Start(); err != nil {
		return faninResult{}, 0, fmt.Errorf("start the client process: %w", err)
	}
	var res faninResult
	var cpu0, cpu1 float64
	var badReport error
	got := false
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() { // to EOF: the process's stdout is drained whatever it prints
		line := bytes.TrimSpace(sc.Bytes())
		switch {
		case string(line) == faninStartLine:
			cpu0 = transportbench.CPUSeconds()
		case len(line) > 0 && line[0] == '{' && !got:
			cpu1 = transportbench.CPUSeconds()
			got = true
			if err := json.Unmarshal(line, &res); err != nil {
				badReport = fmt.Errorf("client process: bad report %q: %w", line, err)
			}
		}
	}
	scanErr := sc.Err()
	if scanErr != nil {
		_ = cmd.Process.Kill() // it may be blocked writing to the pipe
	}
	if err := cmd.Wait(); err != nil {
		return faninResult{}, 0, fmt.Errorf("client process: %w (its messages are above)", err)
	}
	if scanErr != nil {
		return faninResult{}, 0, fmt.Errorf("client process: read its report: %w", scanErr)
	}
	if badReport != nil {
		return faninResult{}, 0, badReport
	}
	if !got || cpu0 == 0 {
		return faninResult{}, 0, errors.New("client process exited without a report")
	}
	if res.Batches == 0 || res.Seconds <= 0 {
		return faninResult{}, 0, fmt.Errorf("client process: read %d batches in %.2f s", res.Batches, res.Seconds)
	}
	return res, cpu1 - cpu0, nil
}

func writeFaninTable(w io.Writer, rows []benchRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\tMB/s into client\tbatches/s\tclient CPU-s/GB\tworkers CPU-s/GB\tRSS before job MiB\tRSS max MiB\tRSS median MiB\tGo heap max MiB\tfree buffers max MiB\tbound MiB\tRSS max-bound MiB\tserving\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d/%d\t\n",
			r["workers"], r["mb_per_s"], r["batches_per_s"], r["client_cpu_s_per_gb"], r["workers_cpu_s_per_gb"],
			r["rss_before_mb"], r["rss_max_mb"], r["rss_median_mb"], r["heap_max_mb"], r["pool_max_mb"], r["bound_mb"], r["rss_minus_bound_mb"], r["serving"], r["workers"])
	}
	return tw.Flush()
}

// ---- the client process

func faninClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("fanin "+faninClientFlag, "--addr HOST:PORT --workers K [flags]", stderr)
	addr := fs.String("addr", "", "a node's QUIC address")
	workers := fs.Int("workers", 0, "workers the job must be served by")
	job := fs.String("job", "fanin", "job name")
	config := addFaninFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config()
	if err != nil {
		return err
	}
	if *addr == "" || *workers < 1 {
		return errors.New("client mode needs --addr and --workers >= 1")
	}
	if cfg.gogc > 0 {
		debug.SetGCPercent(cfg.gogc)
	}
	window := time.Duration(cfg.seconds * float64(time.Second))
	warmup := time.Duration(cfg.warmup * float64(time.Second))
	// Everything, from dialing to the end of the window, within a bound.
	ctx, cancel := context.WithTimeout(ctx, warmup+window+90*time.Second)
	defer cancel()
	tcfg := transport.FastConfig()
	o := cfg.opts
	o.Transport = &tcfg
	cl, err := client.Dial(ctx, *addr, o)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The client's memory before any job: the fixed part of its footprint.
	rssBefore, err := procStatusBytes("VmRSS")
	if err != nil {
		return err
	}
	it, err := cl.Distribute(ctx, cfg.spec(), client.JobOptions{Name: *job, Sharding: client.Sharding(cfg.sharding), Workers: client.AllWorkers, Offload: client.OffloadRemote, GCAfter: time.Second})
	if err != nil {
		return err
	}
	defer func() {
		if err := it.Close(); err != nil {
			fmt.Fprintf(stderr, "warning: client process: detach from the job: %v\n", err)
		}
	}()
	step := time.Duration(cfg.stepMs * float64(time.Millisecond))
	res, err := faninMeasure(ctx, cl, it, *workers, warmup, window, step, cfg.release, stdout)
	if err != nil {
		return err
	}
	res.RSSBeforeBytes = rssBefore
	o.Transport = &tcfg
	res.BoundBytes = o.BufferBound(*workers, res.Bytes/res.Batches)
	return cli.WriteJSON(stdout, res)
}

// faninMeasure waits until each of the job's workers has delivered a
// batch, reads for warmup more, prints faninStartLine, then reads for
// window while sampling RSS. After each batch it spends step (a training
// step's stand-in).
func faninMeasure(ctx context.Context, cl *client.Client, it *client.Iterator, workers int, warmup, window, step time.Duration, release bool, stdout io.Writer) (faninResult, error) {
	next := func() error {
		b, err := it.Next(ctx)
		if err != nil {
			return err
		}
		if step > 0 {
			t := time.NewTimer(step)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if release {
			b.Release()
		}
		return nil
	}
	start := time.Now()
	for {
		if _, err := it.Next(ctx); err != nil {
			return faninResult{}, fmt.Errorf("before every worker sent a batch: %w", err)
		}
		if st := it.Stats(); len(st.Workers) >= workers {
			break
		}
		if time.Since(start) > 60*time.Second {
			return faninResult{}, fmt.Errorf("after 60 s only %d of %d workers had sent a batch", len(it.Stats().Workers), workers)
		}
	}
	res := faninResult{Workers: workers, FirstBatchesMs: ms(time.Since(start))}
	for t := time.Now(); time.Since(t) < warmup; {
		if err := next(); err != nil {
			return res, fmt.Errorf("during the warm-up: %w", err)
		}
	}
	if _, err := fmt.Fprintln(stdout, faninStartLine); err != nil {
		return res, err
	}
	st0, cpu0, t0 := it.Stats(), transportbench.CPUSeconds(), time.Now()
	sctx, stopSampling := context.WithCancel(ctx)
	var rss, heap, pool []int64
	var wg sync.WaitGroup
	wg.Go(func() {
		rss, heap, pool = sampleMemory(sctx, 100*time.Millisecond, func() int64 { return cl.BufferStats().HeldBytes })
	})
	var err error
	for time.Since(t0) < window && err == nil {
		err = next()
	}
	st1, cpu1, t1 := it.Stats(), transportbench.CPUSeconds(), time.Now()
	stopSampling()
	wg.Wait()
	if err != nil {
		return res, fmt.Errorf("during the window: %w", err)
	}
	res.Bytes, res.Batches = st1.Bytes-st0.Bytes, st1.Batches-st0.Batches
	res.Seconds, res.CPUSeconds = t1.Sub(t0).Seconds(), cpu1-cpu0
	res.PerWorkerBatches = map[string]int64{}
	for w, s := range st1.Workers {
		res.PerWorkerBatches[w] = s.Batches - st0.Workers[w].Batches
	}
	res.RSSSamples = len(rss)
	res.RSSMaxBytes, res.RSSMedianBytes = slicesMax(rss), median(rss)
	res.HeapMaxBytes, res.PoolMaxBytes = slicesMax(heap), slicesMax(pool)
	// Linux updates VmHWM lazily (it can trail VmRSS), so the peak is
	// the larger of it and the samples.
	if res.PeakRSSBytes, err = procStatusBytes("VmHWM"); err != nil {
		return res, err
	}
	res.PeakRSSBytes = max(res.PeakRSSBytes, res.RSSMaxBytes)
	if res.Batches == 0 {
		return res, errors.New("no batch arrived during the window")
	}
	return res, nil
}

// sampleMemory reads the process's RSS, Go heap (live and not yet swept
// objects) and the bytes of free buffers the client keeps for reuse (held)
// now and every period until ctx ends.
func sampleMemory(ctx context.Context, period time.Duration, held func() int64) (rss, heap, pool []int64) {
	t := time.NewTicker(period)
	defer t.Stop()
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		if n, err := procStatusBytes("VmRSS"); err == nil {
			rss = append(rss, n)
		}
		metrics.Read(m)
		if m[0].Value.Kind() == metrics.KindUint64 {
			heap = append(heap, int64(m[0].Value.Uint64()))
		}
		pool = append(pool, held())
		select {
		case <-ctx.Done():
			return rss, heap, pool
		case <-t.C:
		}
	}
}

// procStatusBytes reads a "kB" field of /proc/self/status (Linux).
func procStatusBytes(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read memory use (Linux /proc only): %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("/proc/self/status: no %s line in kB", field)
}

func slicesMax(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
