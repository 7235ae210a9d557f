package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/diagnose"
)

func init() {
	registerBench(cli.Command{Name: "tune", Summary: "misconfigured pipelines as written, rewritten by diagnose, autotuned, hill-climbed and the best of a sweep of allocations", Run: benchTune})
}

// tunePipeline is one misconfigured pipeline of the tune benchmark, with
// the core budget every variant gets. Their maps wait (sleep_us) instead
// of computing, standing in for CPU work, so that 8 cores can be emulated
// on a small machine; prefetch_starved's second op is real CPU work.
type tunePipeline struct {
	name  string
	cores float64
	yaml  string
}

var tunePipelines = []tunePipeline{
	// An expensive transform at parallelism 1 among cheap ops, no prefetch.
	{"expensive_map", 8, `source: {range: {stop: 100000000}}
ops:
  - map: {fn: cast, args: {tensor: value, dtype: float32}}
  - map: {fn: cost, args: {sleep_us: 2000}}
  - batch: {size: 16}
`},
	// An expensive decode (3 ms) then a cheaper augmentation (1 ms), both
	// at parallelism 1: the budget must be split 3:1.
	{"expensive_decode", 8, `source: {range: {stop: 100000000}}
ops:
  - map: {fn: cost, args: {sleep_us: 3000}}
  - map: {fn: cost, args: {sleep_us: 1000}}
  - batch: {size: 16}
`},
	// The cheap map (1 ms) got the workers, the expensive one (3 ms) too
	// few: parallelising the op that already has workers is tempting.
	{"wrong_op_parallel", 8, `source: {range: {stop: 100000000}}
ops:
  - map: {fn: cost, args: {sleep_us: 1000}, parallelism: 6}
  - map: {fn: cost, args: {sleep_us: 3000}, parallelism: 2}
  - batch: {size: 16}
`},
	// A read-like wait and 1 ms of real CPU work in one goroutine: only a
	// prefetch between them helps (no map to give workers).
	{"prefetch_starved", 2, `source: {range: {stop: 100000000}}
ops:
  - cost: {sleep_us: 2000}
  - cost: {cpu_us: 1000}
  - batch: {size: 16}
`},
}

// The variants of each pipeline.
const (
	tuneAsWritten = "as_written"
	tuneRewritten = "rewritten"
	tuneAutotune  = "autotune"
	tuneHillClimb = "hill_climb"
	tuneBestSweep = "best_sweep"
)

// hillClimbGain is the improvement the hill climber needs to keep a step,
// as tf.data's AUTOTUNE-like tuners do: below it the step is undone and
// the climb stops.
const hillClimbGain = 1.02

func benchTune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("tune", "[--seconds S] [--pipelines a,b] [--json]", stderr)
	seconds := fs.Float64("seconds", 1.5, "measurement window per run (after the warm-up)")
	warmup := fs.Float64("warmup", 0.5, "warm-up before each measurement; autotune runs get 3× it to converge")
	names := fs.String("pipelines", "", "comma-separated subset of: expensive_map, expensive_decode, wrong_op_parallel, prefetch_starved (default all)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: pipeline, variant, elements_per_second, predicted_elements_per_second (rewritten), parallelism, runs")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if !(*seconds > 0) || !(*warmup >= 0) {
		return cli.InputError(errors.New("--seconds must be > 0 and --warmup >= 0"))
	}
	pick := tunePipelines
	if *names != "" {
		pick = nil
		for _, n := range cli.SplitList(*names) {
			i := slices.IndexFunc(tunePipelines, func(p tunePipeline) bool { return p.name == n })
			if i < 0 {
				return cli.InputError(fmt.Errorf("--pipelines: unknown pipeline %q", n))
			}
			pick = append(pick, tunePipelines[i])
		}
	}
	m := tuneMeasurer{ctx: ctx, warm: dur(*warmup), window: dur(*seconds), stderr: stderr}
	var rows []benchRow
	for _, tp := range pick {
		r, err := m.pipeline(tp)
		if err != nil {
			return fmt.Errorf("%s: %w", tp.name, err)
		}
		rows = append(rows, r...)
	}
	return printRows(stdout, *jsonOut, []string{"pipeline", "variant", "elements_per_second", "predicted_elements_per_second", "ratio_vs_best_sweep", "parallelism", "runs"}, rows)
}

func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

type tuneMeasurer struct {
	ctx          context.Context
	warm, window time.Duration
	stderr       io.Writer
}

// measure runs spec for the warm-up and the window and returns the
// outputs per second in the window and the window's statistics.
func (m tuneMeasurer) measure(spec *pipeline.Spec, o pipeline.Options, warm time.Duration) (float64, pipeline.Stats, error) {
	ss, err := pipeline.Splits(spec)
	if err != nil {
		return 0, pipeline.Stats{}, err
	}
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	it, err := pipeline.OpenWithOptions(ctx, spec, ss, o)
	if err != nil {
		return 0, pipeline.Stats{}, err
	}
	defer it.Close()
	read := func(d time.Duration) (int64, error) {
		var n int64
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			if _, err := it.Next(ctx); err != nil {
				return n, err
			}
		}
		return n, nil
	}
	if _, err := read(warm); err != nil {
		return 0, pipeline.Stats{}, err
	}
	s0, t0 := it.Stats(), time.Now()
	n, err := read(m.window)
	if err != nil {
		return 0, pipeline.Stats{}, err
	}
	s1, t1 := it.Stats(), time.Now()
	w, err := s1.Minus(s0)
	if err != nil {
		return 0, pipeline.Stats{}, err
	}
	return float64(n) / t1.Sub(t0).Seconds(), w, nil
}

// parallelisms lists the maps' parallelism (index in Spec.Ops → value).
func parallelisms(s *pipeline.Spec) map[int]int {
	out := map[int]int{}
	for i, op := range s.Ops {
		if op.Map != nil {
			out[i] = max(op.Map.Parallelism, 1)
		}
	}
	return out
}

// withParallelism returns a copy of s with the maps' parallelism set.
func withParallelism(s *pipeline.Spec, par map[int]int) *pipeline.Spec {
	c := *s
	c.Ops = slices.Clone(s.Ops)
	for i, p := range par {
		mp := *c.Ops[i].Map
		mp.Parallelism = p
		c.Ops[i].Map = &mp
	}
	return &c
}

func sumPar(par map[int]int) int {
	n := 0
	for _, p := range par {
		n += p
	}
	return n
}

func (m tuneMeasurer) pipeline(tp tunePipeline) ([]benchRow, error) {
	spec, err := pipeline.ParseYAML([]byte(tp.yaml))
	if err != nil {
		return nil, err
	}
	row := func(variant string, eps float64, par map[int]int, runs int) benchRow {
		fmt.Fprintf(m.stderr, "tune: %s %s: %.1f outputs/s (parallelism %v)\n", tp.name, variant, eps, par)
		return benchRow{"pipeline": tp.name, "variant": variant, "elements_per_second": eps, "parallelism": fmt.Sprint(par), "runs": runs, "cores": tp.cores}
	}
	budget := func() float64 { return tp.cores }
	var rows []benchRow

	asWritten, st, err := m.measure(spec, pipeline.Options{}, m.warm)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row(tuneAsWritten, asWritten, parallelisms(spec), 1))

	report, err := diagnose.Analyze(spec, diagnose.Run{Ops: st.Ops, Seconds: st.Elapsed.Seconds()}, diagnose.Budget{Cores: tp.cores})
	if err != nil {
		return nil, err
	}
	rewritten, err := diagnose.Rewrite(spec, report.Plan)
	if err != nil {
		return nil, err
	}
	rw, _, err := m.measure(rewritten, pipeline.Options{}, m.warm)
	if err != nil {
		return nil, err
	}
	r := row(tuneRewritten, rw, parallelisms(rewritten), 1)
	r["predicted_elements_per_second"] = report.RecommendedPredictedElementsPerSecond
	rows = append(rows, r)

	auto := *spec
	auto.Autotune = true
	at, ast, err := m.measure(&auto, pipeline.Options{Cores: budget, TuneInterval: 250 * time.Millisecond}, 3*m.warm+time.Second)
	if err != nil {
		return nil, err
	}
	livePar := map[int]int{}
	for i, op := range auto.Ops {
		if op.Map != nil {
			livePar[i] = ast.Ops[i+1].Parallelism
		}
	}
	rows = append(rows, row(tuneAutotune, at, livePar, 1))

	// Hill climbing: one more worker for the map with the most stall, kept
	// while it gains hillClimbGain, within the budget.
	cur, curRate, curStats, runs := parallelisms(spec), asWritten, st, 1
	for len(cur) > 0 && float64(sumPar(cur)) < tp.cores {
		best, bestStall := -1, -1.0
		for i := range cur {
			if s := curStats.Ops[i+1].StallSeconds; s > bestStall {
				best, bestStall = i, s
			}
		}
		try := mapsClone(cur)
		try[best]++
		rate, s, err := m.measure(withParallelism(spec, try), pipeline.Options{}, m.warm)
		if err != nil {
			return nil, err
		}
		runs++
		if rate < curRate*hillClimbGain {
			break
		}
		cur, curRate, curStats = try, rate, s
	}
	rows = append(rows, row(tuneHillClimb, curRate, cur, runs))

	// The sweep: every allocation of the budget's cores to the maps (each
	// at least 1), on the rewritten spec's structure (its prefetches).
	sweepBest, bestPar, runs := 0.0, map[int]int(nil), 0
	for _, par := range allocations(parallelisms(rewritten), int(tp.cores)) {
		rate, _, err := m.measure(withParallelism(rewritten, par), pipeline.Options{}, m.warm)
		if err != nil {
			return nil, err
		}
		runs++
		if rate > sweepBest {
			sweepBest, bestPar = rate, par
		}
	}
	rows = append(rows, row(tuneBestSweep, sweepBest, bestPar, runs))
	for _, r := range rows {
		r["ratio_vs_best_sweep"] = r["elements_per_second"].(float64) / sweepBest
	}
	return rows, nil
}

func mapsClone(m map[int]int) map[int]int {
	out := make(map[int]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// allocations lists every assignment of parallelism ≥ 1 to the maps of
// template (their keys) whose sum is at most budget; one empty
// assignment when there is no map.
func allocations(template map[int]int, budget int) []map[int]int {
	keys := make([]int, 0, len(template))
	for k := range template {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []map[int]int
	var rec func(i, left int, cur map[int]int)
	rec = func(i, left int, cur map[int]int) {
		if i == len(keys) {
			out = append(out, mapsClone(cur))
			return
		}
		for p := 1; p <= left-(len(keys)-1-i); p++ {
			cur[keys[i]] = p
			rec(i+1, left-p, cur)
		}
		delete(cur, keys[i])
	}
	rec(0, budget, map[int]int{})
	return out
}
