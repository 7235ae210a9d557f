package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
	"github.com/feedmesh/feedmesh/pipeline"
)

// ---- dynamic vs off

func benchDynamic(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("dynamic", "[--seconds S] [--runs N] [--json]", stderr)
	batch := fs.Int64("batch", 256, "batch size")
	splitSize := fs.Int64("split-size", 2000, "elements per split")
	seconds := fs.Float64("seconds", 2, "steady-state window measured per run, after 0.5 s of warm-up")
	runs := fs.Int("runs", 3, "alternating runs of each policy; medians are reported")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of each measured window to PREFIX-<sharding>-<delivery>-<run>.pprof")
	traceOut := fs.String("trace", "", "write an execution trace (go tool trace) of each measured window to PREFIX-<sharding>-<delivery>-<run>.trace")
	memProfile := fs.String("memprofile", "", "write a heap profile at the end of each measured window (after a GC) to PREFIX-<sharding>-<delivery>-<run>.pprof")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: sharding, delivery, runs, batches_per_s, ratio_vs_off, ratio_vs_at_most_once (of the medians), run_ratio_vs_off, run_ratio_vs_at_most_once (medians of the ratios within each run), cpu_us_per_batch (CPU time of the whole process, cluster and client, per batch delivered: less sensitive to the machine's other load than batches/s), allocs_per_batch (heap objects the whole process allocated per batch delivered: insensitive to it), raft_cmds_per_s_per_worker, raft_cmds_per_s (by command type, the whole cluster)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	c, cleanup, err := jobsCluster(ctx, 3)
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := benchClient(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	// A range that outlasts the measurement: both policies are measured in steady state, so job
	// start and end (which DYNAMIC, with a third of OFF's data to deliver,
	// would pay proportionally more for) do not count.
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 1 << 28, SplitSize: *splitSize}})
	spec.Batch(*batch, false)
	window := time.Duration(*seconds * float64(time.Second))
	// OFF, DYNAMIC exactly-once (the default) and DYNAMIC at-most-once,
	// alternating within each run.
	type variant struct {
		sh       client.Sharding
		delivery string
	}
	variants := []variant{{client.Off, ""}, {client.Dynamic, client.ExactlyOnce}, {client.Dynamic, client.AtMostOnce}}
	rates := map[variant][]float64{}
	cmdRates := map[variant][]map[string]float64{} // per run: command type → commands/s
	cpuPerBatch := map[variant][]float64{}         // per run: the process's CPU µs per batch delivered
	allocsPerBatch := map[variant][]float64{}      // per run: heap objects allocated per batch delivered
	workers := len(c.Running())
	for r := 0; r < *runs; r++ {
		// Each run starts with the next variant, so that none always
		// follows the same one (a job's end, its GC, overlaps the next
		// job's start).
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			name := fmt.Sprintf("%s-%s-%d", v.sh, v.delivery, r)
			w := &dynamicWindow{c: c, cpuProfile: *cpuProfile, trace: *traceOut, memProfile: *memProfile, name: strings.ReplaceAll(name, "--", "-")}
			rows, err := steadyRate(ctx, c, cl, spec, client.JobOptions{Name: name, Sharding: v.sh, Workers: client.AllWorkers, Offload: client.OffloadRemote, Delivery: v.delivery}, window, &windowHooks{start: w.start, end: w.end})
			if err != nil {
				return err
			}
			if w.err != nil {
				return w.err
			}
			rate := rows / float64(*batch)
			rates[v] = append(rates[v], rate)
			cmdRates[v] = append(cmdRates[v], w.cmdRates)
			cpu := w.cpu.Seconds() * 1e6 / (rate * w.elapsed.Seconds())
			cpuPerBatch[v] = append(cpuPerBatch[v], cpu)
			batches := rate * w.elapsed.Seconds()
			allocs := float64(w.allocs[0]) / batches
			allocsPerBatch[v] = append(allocsPerBatch[v], allocs)
			fmt.Fprintf(stderr, "  run %d %-8s %-12s %8.0f batches/s  %5.1f CPU µs/batch  %5.0f allocs (%3.1f KiB)/batch  heap %.1f MiB (scan %.1f) %d GCs  raft %5.1f cmds/s/worker (%s)\n", r, v.sh, v.delivery, rate, cpu, allocs, float64(w.allocs[1])/batches/1024, float64(w.live)/(1<<20), float64(w.scan)/(1<<20), w.gcCycles, sumRates(w.cmdRates)/float64(workers), fmtRates(w.cmdRates))
		}
		exo, amo, off := rates[variants[1]][r], rates[variants[2]][r], rates[variants[0]][r]
		fmt.Fprintf(stderr, "  run %d ratios: exactly-once/at-most-once %.3f, exactly-once/off %.3f, at-most-once/off %.3f\n", r, exo/amo, exo/off, amo/off)
	}
	// Ratios within each run: the machine's other load changes from one
	// run to the next, less within one.
	runRatio := func(v, base variant) float64 {
		var xs []float64
		for r := range rates[v] {
			xs = append(xs, rates[v][r]/rates[base][r])
		}
		return median(xs)
	}
	off := median(rates[variants[0]])
	amo := median(rates[variants[2]])
	var rows []benchRow
	for _, v := range variants {
		m := median(rates[v])
		byType := medianRates(cmdRates[v])
		rows = append(rows, benchRow{"sharding": string(v.sh), "delivery": v.delivery, "runs": *runs, "batches_per_s": m, "ratio_vs_off": m / off, "ratio_vs_at_most_once": m / amo,
			"run_ratio_vs_off": runRatio(v, variants[0]), "run_ratio_vs_at_most_once": runRatio(v, variants[2]),
			"cpu_us_per_batch":           median(cpuPerBatch[v]),
			"allocs_per_batch":           median(allocsPerBatch[v]),
			"raft_cmds_per_s_per_worker": sumRates(byType) / float64(workers), "raft_cmds_per_s": byType})
	}
	return printRows(stdout, *jsonOut, []string{"sharding", "delivery", "runs", "batches_per_s", "ratio_vs_off", "ratio_vs_at_most_once", "run_ratio_vs_off", "run_ratio_vs_at_most_once", "cpu_us_per_batch", "allocs_per_batch", "raft_cmds_per_s_per_worker"}, rows)
}

// dynamicWindow is what benchDynamic does as a measured window starts and
// ends: profiles, and the Raft commands committed meanwhile.
type dynamicWindow struct {
	c                             *localcluster.Cluster
	cpuProfile, trace, memProfile string // file prefixes, "" for none
	name                          string

	t0       time.Time
	cpu0     time.Duration
	cmds0    map[string]uint64
	files    []*os.File
	cmdRates map[string]float64 // command type → commands/s over the window
	elapsed  time.Duration      // the window
	cpu      time.Duration      // the process's CPU time (user and system) over the window
	// heap allocations (objects, bytes) over the window: unlike CPU
	// time, the machine's other load does not move them
	allocs0, allocs [2]uint64
	live, scan      uint64 // heap live and scannable at the window's end
	gc0, gcCycles   uint64 // GC cycles before and over the window
	err             error
}

// heapAllocs reads the process's cumulative heap allocations: objects and
// bytes.
func heapAllocs() [2]uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return [2]uint64{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// gcFigures reads the heap marked live by the last GC cycle, the part of
// it the GC scans (pointers), and the GC cycles so far.
func gcFigures() (live, scan, cycles uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}

func (w *dynamicWindow) start() {
	if w.cpuProfile != "" {
		f, err := os.Create(w.cpuProfile + "-" + w.name + ".pprof")
		if err == nil {
			err = pprof.StartCPUProfile(f)
			w.files = append(w.files, f)
		}
		w.setErr(err)
	}
	if w.trace != "" {
		f, err := os.Create(w.trace + "-" + w.name + ".trace")
		if err == nil {
			err = trace.Start(f)
			w.files = append(w.files, f)
		}
		w.setErr(err)
	}
	w.cmds0 = w.commands()
	w.allocs0 = heapAllocs()
	_, _, w.gc0 = gcFigures()
	w.cpu0 = processCPU()
	w.t0 = time.Now()
}

func (w *dynamicWindow) end() {
	w.elapsed, w.cpu = time.Since(w.t0), processCPU()-w.cpu0
	a := heapAllocs()
	w.allocs = [2]uint64{a[0] - w.allocs0[0], a[1] - w.allocs0[1]}
	var gcs uint64
	w.live, w.scan, gcs = gcFigures()
	w.gcCycles = gcs - w.gc0
	d := w.elapsed.Seconds()
	w.cmdRates = map[string]float64{}
	for t, n := range w.commands() {
		if k := n - w.cmds0[t]; k > 0 {
			w.cmdRates[t] = float64(k) / d
		}
	}
	if w.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if w.trace != "" {
		trace.Stop()
	}
	if w.memProfile != "" {
		f, err := os.Create(w.memProfile + "-" + w.name + ".pprof")
		if err == nil {
			runtime.GC() // the heap live now, not as of the last cycle
			err = pprof.Lookup("heap").WriteTo(f, 0)
			w.files = append(w.files, f)
		}
		w.setErr(err)
	}
	for _, f := range w.files {
		w.setErr(f.Close())
	}
}

func (w *dynamicWindow) setErr(err error) {
	if w.err == nil {
		w.err = err
	}
}

// commands are the commands node 0 applied, by type: every node applies
// every committed command, and node 0 stays the same node whichever
// leads (leadership may move under load).
func (w *dynamicWindow) commands() map[string]uint64 {
	return w.c.Node(0).Raft().AppliedCommands()
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sumRates(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func fmtRates(m map[string]float64) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.1f", t, m[t]))
	}
	return strings.Join(parts, ", ")
}

// medianRates is the median of each command type's rate over runs (0 in
// a run that had none).
func medianRates(runs []map[string]float64) map[string]float64 {
	types := map[string]bool{}
	for _, r := range runs {
		for t := range r {
			types[t] = true
		}
	}
	out := map[string]float64{}
	for t := range types {
		var xs []float64
		for _, r := range runs {
			xs = append(xs, r[t])
		}
		out[t] = median(xs)
	}
	return out
}
