package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/diagnose"
)

func init() {
	register(cli.Command{
		Name:    "diagnose",
		Summary: "run a pipeline spec for a bounded time, find what bounds its throughput and recommend (or --write) a better allocation",
		Run:     runDiagnose,
	})
}

// maxDiagnoseSeconds bounds --seconds.
const maxDiagnoseSeconds = 3600

// runDiagnose is `feedmesh diagnose SPEC [--cores N] [--memory BYTES]
// [--seconds S] [--json] [--write FILE]` or `feedmesh diagnose --job NAME
// [--addr NODE] [SPEC] …`: the shell around package pipeline/diagnose. It
// runs the pipeline in-process, or gathers a running job's statistics from
// its workers, hands the per-op statistics to diagnose.Analyze and prints
// the report.
func runDiagnose(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "SPEC [--cores N] [--memory BYTES] [--seconds S] [--json] [--write tuned.yaml]\n" +
		"       feedmesh diagnose --job NAME [--addr NODE] [SPEC] [--cores N] [--memory BYTES] [--json] [--write tuned.yaml]"
	fs := prog.NewFlagSet("diagnose", synopsis, stderr)
	cores := fs.Float64("cores", float64(runtime.NumCPU()), "the core budget `N` the recommendation may use (Plumber's LP); more than the machine has emulates a bigger one with ops that sleep; with --job, per worker, and the workers' GOMAXPROCS by default")
	fs.Lookup("cores").DefValue = "this machine's cores" // as help shows it: the same on every machine
	memory := fs.String("memory", "0", "memory budget for a cache, in `BYTES` (suffixes KB, MB, GB, KiB, MiB, GiB); 0: no cache recommendation")
	seconds := fs.Float64("seconds", 5, "run the pipeline for at most `S` seconds (not with --job)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	write := fs.String("write", "", "write the spec with the recommendation applied to `FILE` (YAML); with --job, give the job's SPEC file too")
	job := fs.String("job", "", "diagnose the running job `NAME` from its workers' statistics instead of running SPEC here")
	cf := addConnFlags(fs)
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	var specArg string
	switch {
	case len(positional) == 1:
		specArg = positional[0]
	case len(positional) > 1 || *job == "":
		fmt.Fprintf(stderr, "diagnose: want one SPEC file, or --job NAME, got %d arguments\n", len(positional))
		fs.Usage()
		return cli.ErrUsage
	}
	if !(*cores > 0) || math.IsInf(*cores, 0) || *cores > 1<<16 {
		return cli.InputError(fmt.Errorf("--cores must be in (0, 65536], got %v", *cores))
	}
	mem, err := parseBytes(*memory)
	if err != nil {
		return cli.InputError(fmt.Errorf("--memory: %w", err))
	}
	if *write != "" && strings.HasSuffix(strings.ToLower(*write), ".json") {
		return cli.InputError(fmt.Errorf("--write %s: the rewritten spec is YAML; give a .yaml or .yml name", *write))
	}
	out := diagnoseOut{cores: *cores, memory: mem, asJSON: *asJSON, write: *write}
	if *job != "" {
		if flagGiven(fs, "seconds") {
			return cli.InputError(errors.New("--seconds runs SPEC here; with --job the figures are the job's, since its workers started it"))
		}
		if *write != "" && specArg == "" {
			return cli.InputError(errors.New("--write with --job needs the SPEC file the job was started from (the rewrite keeps its layout and comments)"))
		}
		out.coresGiven = flagGiven(fs, "cores")
		return diagnoseJob(ctx, cf, *job, specArg, out, stdout, stderr)
	}
	for _, f := range []string{"addr", "tls-ca", "tls-cert", "tls-key", "timeout"} {
		if flagGiven(fs, f) {
			return cli.InputError(fmt.Errorf("--%s reaches a node: it goes with --job NAME", f))
		}
	}
	if !(*seconds > 0) || *seconds > maxDiagnoseSeconds {
		return cli.InputError(fmt.Errorf("--seconds must be in (0, %d], got %v", maxDiagnoseSeconds, *seconds))
	}
	specPath, spec, err := loadSpecArg(specArg)
	if err != nil {
		return err
	}
	run, err := measure(ctx, spec, time.Duration(*seconds*float64(time.Second)), stderr)
	if err != nil {
		return err
	}
	return out.report(stdout, spec, specPath, run, nil)
}

// diagnoseOut is what the flags ask of a diagnosis beside its input.
type diagnoseOut struct {
	cores      float64
	coresGiven bool
	memory     int64
	asJSON     bool
	write      string
}

// loadSpecArg loads the SPEC argument and returns its absolute path too.
func loadSpecArg(arg string) (string, *pipeline.Spec, error) {
	specPath, err := filepath.Abs(arg)
	if err != nil {
		return "", nil, cli.InputError(err)
	}
	spec, err := pipeline.LoadFile(specPath)
	if err != nil {
		return "", nil, cli.InputError(err)
	}
	return specPath, spec, nil
}

// report analyses run, writes the rewritten spec if asked, and prints the
// diagnosis (a table, or JSON with the job's fields first when job is
// not nil).
func (o diagnoseOut) report(stdout io.Writer, spec *pipeline.Spec, specPath string, run diagnose.Run, job *jobDiagnosis) error {
	report, err := diagnose.Analyze(spec, run, diagnose.Budget{Cores: o.cores, MemoryBytes: o.memory})
	if err != nil {
		return err
	}
	var wrote string
	if o.write != "" {
		if wrote, err = writeTuned(specPath, spec, report.Plan, o.write); err != nil {
			return err
		}
	}
	if o.asJSON {
		if job != nil {
			job.Report = report
			return json.NewEncoder(stdout).Encode(job)
		}
		return json.NewEncoder(stdout).Encode(report)
	}
	fp, _ := spec.Fingerprint()
	if job != nil {
		job.writeHeader(stdout)
	}
	if err := writeDiagnosis(stdout, fp, run, report); err != nil {
		return err
	}
	if wrote != "" {
		fmt.Fprintf(stdout, "wrote %s (dataset %s)\n", o.write, wrote)
	}
	return nil
}

// measure runs spec for at most d, printing progress on stderr once a
// second, and returns what it measured.
func measure(ctx context.Context, spec *pipeline.Spec, d time.Duration, stderr io.Writer) (diagnose.Run, error) {
	splits, err := pipeline.Splits(spec)
	if err != nil {
		return diagnose.Run{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	it, err := pipeline.Open(runCtx, spec, splits)
	if err != nil {
		return diagnose.Run{}, err
	}
	defer it.Close()
	var outputs int64
	ended := false
	lastReport := start
	for {
		_, err := it.Next(runCtx)
		if errors.Is(err, io.EOF) {
			ended = true
			break
		}
		if err != nil {
			if ctx.Err() == nil && runCtx.Err() != nil {
				break // time is up
			}
			return diagnose.Run{}, err
		}
		outputs++
		if now := time.Now(); now.Sub(lastReport) >= time.Second {
			lastReport = now
			fmt.Fprintf(stderr, "diagnose: %.0f s of %.0f, %d outputs\n", now.Sub(start).Seconds(), d.Seconds(), outputs)
		}
	}
	elapsed := time.Since(start)
	it.Close() // stop read-ahead first, so the counts agree with each other
	st := it.Stats()
	if outputs < 20 {
		fmt.Fprintf(stderr, "diagnose: only %d outputs in %.1f s: the figures are rough (raise --seconds)\n", outputs, elapsed.Seconds())
	}
	run := diagnose.Run{Ops: st.Ops, Seconds: elapsed.Seconds()}
	if len(st.Ops) > 0 {
		o := diagnose.Observed{SourceElements: st.Ops[0].ElementsOut, SourceBytes: st.Ops[0].BytesOut, Ended: ended}
		if spec.Source.Files != nil {
			o.FileBytes = splitBytes(splits)
		}
		run.EpochSourceElements, run.EpochEstimated = diagnose.EpochSourceElements(spec, o)
	}
	return run, nil
}

// splitBytes is the total size of file splits (0 if a file cannot be read).
func splitBytes(splits []pipeline.Split) int64 {
	var total int64
	for _, s := range splits {
		end := s.End
		if end < 0 {
			fi, err := os.Stat(s.Path)
			if err != nil {
				return 0
			}
			end = fi.Size()
		}
		total += max(end-s.Start, 0)
	}
	return total
}

// writeTuned writes the spec at specPath with plan applied to out, checks
// that it loads back as exactly the rewritten spec, and returns its
// fingerprint. It writes a temporary file beside out and renames it, so a
// failure leaves no half-written spec.
func writeTuned(specPath string, spec *pipeline.Spec, plan diagnose.Plan, out string) (string, error) {
	src, err := os.ReadFile(specPath)
	if err != nil {
		return "", err
	}
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return "", cli.InputError(fmt.Errorf("--write: %w", err))
	}
	var relPath func(string) string
	if inDir := filepath.Dir(specPath); filepath.Dir(outAbs) != inDir {
		relPath = func(p string) string {
			if p == "" || filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(inDir, p)
		}
	}
	text, err := diagnose.RewriteYAML(src, plan, relPath)
	if err != nil {
		return "", err
	}
	want, err := diagnose.Rewrite(spec, plan)
	if err != nil {
		return "", err
	}
	wantFP, err := want.Fingerprint()
	if err != nil {
		return "", fmt.Errorf("rewritten spec: %w", err)
	}
	tmp := outAbs + ".tmp"
	if err := os.WriteFile(tmp, text, 0o644); err != nil {
		return "", cli.InputError(fmt.Errorf("--write: %w", err))
	}
	defer os.Remove(tmp)
	back, err := pipeline.LoadFile(tmp)
	if err != nil {
		return "", fmt.Errorf("the rewritten spec does not load (a bug): %w", err)
	}
	gotFP, err := back.Fingerprint()
	if err != nil || gotFP != wantFP {
		return "", fmt.Errorf("the rewritten spec is not the recommended one (a bug): fingerprint %s, want %s", gotFP, wantFP)
	}
	if err := os.Rename(tmp, outAbs); err != nil {
		return "", fmt.Errorf("--write: %w", err)
	}
	return gotFP, nil
}

// writeDiagnosis prints the report for people.
func writeDiagnosis(w io.Writer, fingerprint string, run diagnose.Run, r *diagnose.Report) error {
	fmt.Fprintf(w, "dataset %s\n", fingerprint)
	fmt.Fprintf(w, "ran %.1f s: %.4g outputs/s measured, %.4g predicted as configured (outputs: elements of the last op)\n",
		run.Seconds, r.MeasuredElementsPerSecond, r.PredictedElementsPerSecond)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\top\tpar\trec_par\telements/s\tcpu_ms/element\tbytes/element\tcpu_ms/output\tcritical_path\t")
	for i, o := range r.Ops {
		mark := ""
		if i == r.Bounding {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.4g\t%.4g\t%s\t%.4g\t%.0f %%\t\n", mark, opLabel(o), o.Parallelism, o.RecommendedParallelism,
			o.ElementsPerSecond, o.CPUSecondsPerElement*1e3, pipeline.HumanBytes(o.BytesPerElement), o.CPUSecondsPerOutput*1e3, 100*o.CriticalPathShare)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "* bounds throughput: %s: %s\n", opLabel(r.Ops[r.Bounding]), r.Why)
	gain := r.RecommendedPredictedElementsPerSecond / r.PredictedElementsPerSecond
	fmt.Fprintf(w, "recommended (Plumber's LP on %g cores): %.4g outputs/s predicted (%.2f×), then bounded by %s\n",
		r.Cores, r.RecommendedPredictedElementsPerSecond, gain, r.RecommendedBinding)
	idx := make([]int, 0, len(r.Plan.Parallelism))
	for i := range r.Plan.Parallelism {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		fmt.Fprintf(w, "  %s: parallelism %d → %d\n", opLabel(r.Ops[i+1]), r.Ops[i+1].Parallelism, r.Plan.Parallelism[i])
	}
	for _, a := range r.Plan.PrefetchAfter {
		fmt.Fprintf(w, "  insert prefetch {buffer: %d} after %s\n", diagnose.PrefetchBuffer, opLabel(r.Ops[a+1]))
	}
	if r.Plan.Empty() {
		fmt.Fprintln(w, "  nothing to change")
	}
	if c := r.CacheRecommendation; c != nil {
		est := ""
		if c.Estimated {
			est = " (epoch size estimated)"
		}
		fmt.Fprintf(w, "cache: after %s: %s per epoch%s within %s", opLabel(r.Ops[c.AfterIndex+1]), pipeline.HumanBytes(float64(c.Bytes)), est, pipeline.HumanBytes(float64(c.MemoryBytes)))
		if c.PredictedElementsPerSecond > 0 {
			fmt.Fprintf(w, "; %.4g outputs/s predicted from the second epoch", c.PredictedElementsPerSecond)
		}
		fmt.Fprintf(w, " (%s; specs have no cache op yet, so --write does not add it)\n", r.CacheWhy)
	} else {
		fmt.Fprintf(w, "cache: none (%s)\n", r.CacheWhy)
	}
	return nil
}

// opLabel names an op with its position: "ops[2] map(cost)", or the source.
func opLabel(o diagnose.OpReport) string {
	if o.Index < 0 {
		return o.Name
	}
	return fmt.Sprintf("ops[%d] %s", o.Index, o.Name)
}

// parseBytes reads a byte count: digits with an optional unit (KB, MB, GB,
// TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024; B).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("want a byte count such as 500MB or 2GiB, got %q", s)
	}
	return int64(v * mult), nil
}
