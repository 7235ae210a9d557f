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
	rounds := fs.Int("rounds", 3, "rounds in which every variant's chosen configuration runs in turn (the figures are their medians)")
	jsonOut := fs.Bool("json", false, "print a JSON array of rows: pipeline, variant, elements_per_second (median over the rounds), predicted_elements_per_second (rewritten), ratio_vs_best_sweep, parallelism (live, last round), cores_used (busy seconds over wall time), cores (the budget), runs (of its search), rounds")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if !(*seconds > 0) || !(*warmup >= 0) || *rounds < 1 {
		return cli.InputError(errors.New("--seconds must be > 0, --warmup >= 0 and --rounds >= 1"))
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
		r, err := m.pipeline(tp, *rounds)
		if err != nil {
			return fmt.Errorf("%s: %w", tp.name, err)
		}
		rows = append(rows, r...)
	}
	return printRows(stdout, *jsonOut, []string{"pipeline", "variant", "elements_per_second", "predicted_elements_per_second", "ratio_vs_best_sweep", "parallelism", "cores_used", "runs"}, rows)
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

// tuneVariant is a variant's configuration, chosen in the search phase.
type tuneVariant struct {
	name string
	spec *pipeline.Spec
	opts pipeline.Options
	warm time.Duration
	runs int // runs its search took
}

// pipeline measures one pipeline: a search phase in which each tuner
// chooses its configuration (diagnose from one run as written, hill
// climbing step by step, the sweep over every allocation), then rounds
// in which every variant's configuration runs in turn, so that the
// machine's load falls on all of them alike; the figures are the medians
// over the rounds.
func (m tuneMeasurer) pipeline(tp tunePipeline, rounds int) ([]benchRow, error) {
	spec, err := pipeline.ParseYAML([]byte(tp.yaml))
	if err != nil {
		return nil, err
	}
	budget := func() float64 { return tp.cores }
	asWritten, st, err := m.measure(spec, pipeline.Options{}, m.warm)
	if err != nil {
		return nil, err
	}
	report, err := diagnose.Analyze(spec, diagnose.Run{Ops: st.Ops, Seconds: st.Elapsed.Seconds()}, diagnose.Budget{Cores: tp.cores})
	if err != nil {
		return nil, err
	}
	rewritten, err := diagnose.Rewrite(spec, report.Plan)
	if err != nil {
		return nil, err
	}
	auto := *spec
	auto.Autotune = true

	// Hill climbing: one more worker for the map with the most stall, kept
	// while it gains hillClimbGain, within the budget.
	cur, curRate, curStats, climbRuns := parallelisms(spec), asWritten, st, 1
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
		climbRuns++
		if rate < curRate*hillClimbGain {
			break
		}
		cur, curRate, curStats = try, rate, s
	}
	fmt.Fprintf(m.stderr, "tune: %s: hill climbing chose %v in %d runs\n", tp.name, cur, climbRuns)

	// The sweep: every allocation of workers to the maps on the rewritten
	// spec's structure (its prefetches), each map at least 1, using at
	// most the budget's cores as measured (busy seconds over wall time;
	// a map's first worker may idle, hence a worker count up to the
	// budget plus one per map beyond the first).
	sweepBest, bestPar, sweepRuns := 0.0, parallelisms(rewritten), 0
	for _, par := range allocations(parallelisms(rewritten), int(tp.cores)+max(len(parallelisms(rewritten))-1, 0)) {
		rate, s, err := m.measure(withParallelism(rewritten, par), pipeline.Options{}, m.warm)
		if err != nil {
			return nil, err
		}
		sweepRuns++
		if coresUsed(s) <= tp.cores*1.05 && rate > sweepBest {
			sweepBest, bestPar = rate, par
		}
	}
	fmt.Fprintf(m.stderr, "tune: %s: the sweep's best of %d runs: %v\n", tp.name, sweepRuns, bestPar)

	variants := []tuneVariant{
		{name: tuneAsWritten, spec: spec, warm: m.warm, runs: 1},
		{name: tuneRewritten, spec: rewritten, warm: m.warm, runs: 1},
		{name: tuneAutotune, spec: &auto, warm: 3*m.warm + time.Second, opts: pipeline.Options{Cores: budget, TuneInterval: 250 * time.Millisecond}},
		{name: tuneHillClimb, spec: withParallelism(spec, cur), warm: m.warm, runs: climbRuns},
		{name: tuneBestSweep, spec: withParallelism(rewritten, bestPar), warm: m.warm, runs: sweepRuns},
	}
	rates := make([][]float64, len(variants))
	used := make([][]float64, len(variants))
	live := make([]map[int]int, len(variants))
	for r := 0; r < rounds; r++ {
		for i, v := range variants {
			rate, s, err := m.measure(v.spec, v.opts, v.warm)
			if err != nil {
				return nil, err
			}
			rates[i] = append(rates[i], rate)
			used[i] = append(used[i], coresUsed(s))
			live[i] = map[int]int{}
			for k, op := range v.spec.Ops {
				if op.Map != nil {
					live[i][k] = s.Ops[k+1].Parallelism
				}
			}
		}
	}
	var rows []benchRow
	bestMedian := median(rates[len(variants)-1])
	for i, v := range variants {
		eps := median(rates[i])
		fmt.Fprintf(m.stderr, "tune: %s %s: %.1f outputs/s (rounds %v, parallelism %v)\n", tp.name, v.name, eps, rates[i], live[i])
		r := benchRow{"pipeline": tp.name, "variant": v.name, "elements_per_second": eps, "ratio_vs_best_sweep": eps / bestMedian,
			"parallelism": fmt.Sprint(live[i]), "cores_used": median(used[i]), "cores": tp.cores, "runs": v.runs, "rounds": rounds}
		if v.name == tuneRewritten {
			r["predicted_elements_per_second"] = report.RecommendedPredictedElementsPerSecond
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// coresUsed is the cores a window of statistics kept busy: the ops' busy
// seconds over its wall time (waits standing in for CPU count as busy).
func coresUsed(s pipeline.Stats) float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	var busy float64
	for _, o := range s.Ops {
		busy += max(o.BusySeconds, 0)
	}
	return busy / s.Elapsed.Seconds()
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
