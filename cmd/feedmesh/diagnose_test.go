package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
)

// diagnoseJSON is what `feedmesh diagnose --json` prints.
type diagnoseJSON struct {
	Ops []struct {
		Name                   string  `json:"name"`
		Index                  int     `json:"index"`
		ElementsPerSecond      float64 `json:"elements_per_second"`
		CPUSecondsPerElement   float64 `json:"cpu_seconds_per_element"`
		BytesPerElement        float64 `json:"bytes_per_element"`
		Parallelism            int     `json:"parallelism"`
		RecommendedParallelism int     `json:"recommended_parallelism"`
		CriticalPathShare      float64 `json:"critical_path_share"`
	} `json:"ops"`
	BoundingOp                            string          `json:"bounding_op"`
	PredictedElementsPerSecond            float64         `json:"predicted_elements_per_second"`
	RecommendedPredictedElementsPerSecond float64         `json:"recommended_predicted_elements_per_second"`
	CacheRecommendation                   json.RawMessage `json:"cache_recommendation"`
}

// diagnoseSpec writes spec text to a file and runs `feedmesh diagnose` on
// it for one second with --json and --write; it returns the report and
// the rewritten spec.
func diagnoseSpec(t *testing.T, text string, extra ...string) (diagnoseJSON, *pipeline.Spec, *pipeline.Spec) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	tuned := filepath.Join(t.TempDir(), "tuned.yaml") // another directory
	args := append([]string{"diagnose", path, "--seconds", "1", "--json", "--write", tuned}, extra...)
	out, errOut, code := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("%v exited %d: %s", args, code, errOut)
	}
	var r diagnoseJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	orig, err := pipeline.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rewritten, err := pipeline.LoadFile(tuned)
	if err != nil {
		t.Fatalf("the --write output does not load: %v", err)
	}
	// Only the knobs differ: without its prefetches and with the maps'
	// parallelism of the original, the rewrite is the original dataset.
	back := *rewritten
	back.Ops = nil
	j := 0
	for _, op := range rewritten.Ops {
		if op.Prefetch != nil && (j >= len(orig.Ops) || orig.Ops[j].Prefetch == nil) {
			continue
		}
		if op.Map != nil {
			m := *op.Map
			m.Parallelism = orig.Ops[j].Map.Parallelism
			op.Map = &m
		}
		back.Ops = append(back.Ops, op)
		j++
	}
	fpBack, _ := back.Fingerprint()
	fpOrig, _ := orig.Fingerprint()
	if fpBack != fpOrig {
		t.Fatalf("the rewrite changed more than parallelism and prefetches: %+v", rewritten.Ops)
	}
	return r, orig, rewritten
}

// A cost map at parallelism 1 among cheap ops bounds throughput; the
// rewrite gives it the machine's two cores.
func TestDiagnoseExpensiveMap(t *testing.T) {
	r, _, tuned := diagnoseSpec(t, `source:
  range: {stop: 100000000}
ops:
  - map: {fn: cast, args: {tensor: value, dtype: float32}}
  - map: {fn: cost, args: {cpu_us: 1000}}
  - batch: {size: 4}
`, "--cores", "2")
	if r.BoundingOp != "map(cost)" || r.Ops[2].CriticalPathShare < 0.8 {
		t.Fatalf("bounding op %q, cost map's share %.2f: want map(cost), most of the path", r.BoundingOp, r.Ops[2].CriticalPathShare)
	}
	if p := r.Ops[2].RecommendedParallelism; p < 2 || tuned.Ops[1].Map.Parallelism != p {
		t.Errorf("recommended parallelism %d, written %d: want >= 2 and equal", p, tuned.Ops[1].Map.Parallelism)
	}
	if tuned.Ops[0].Map.Parallelism > 1 {
		t.Errorf("the cheap cast got parallelism %d", tuned.Ops[0].Map.Parallelism)
	}
	if !(r.RecommendedPredictedElementsPerSecond > 1.5*r.PredictedElementsPerSecond) {
		t.Errorf("predicted %v → %v: want the second core to nearly double it", r.PredictedElementsPerSecond, r.RecommendedPredictedElementsPerSecond)
	}
	for _, o := range r.Ops {
		if o.ElementsPerSecond <= 0 || o.BytesPerElement <= 0 || o.Parallelism < 1 {
			t.Errorf("row %+v", o)
		}
	}
}

// The source generates JPEG images one at a time: it bounds throughput,
// and no allocation of cores helps.
func TestDiagnoseSourceBound(t *testing.T) {
	r, _, _ := diagnoseSpec(t, `source:
  synthetic: {kind: image, count: 200000, encoding: jpeg}
ops:
  - map: {fn: cost, args: {cpu_us: 10}, parallelism: 2}
  - batch: {size: 8}
`, "--cores", "2", "--memory", "1GB")
	if r.BoundingOp != "source:synthetic:image" || r.Ops[0].CriticalPathShare != 1 {
		t.Fatalf("bounding op %q (share %v), want the source", r.BoundingOp, r.Ops[0].CriticalPathShare)
	}
	if g := r.RecommendedPredictedElementsPerSecond / r.PredictedElementsPerSecond; g > 1.06 {
		t.Errorf("predicted gain %.2f×: nothing but a faster source can help", g)
	}
	// One epoch, 200 000 JPEG images of ~1.5 KB (batches hold the same
	// bytes), fits 1 GB.
	var c struct {
		AfterIndex int   `json:"after_index"`
		Bytes      int64 `json:"bytes"`
	}
	if err := json.Unmarshal(r.CacheRecommendation, &c); err != nil || c.Bytes <= 0 || c.Bytes > 1e9 {
		t.Errorf("cache recommendation %s: %v", r.CacheRecommendation, err)
	}
}

// A wait (I/O-like) and CPU work run in one goroutine: the wait bounds
// throughput, and the rewrite puts a prefetch between them.
func TestDiagnosePrefetchStarved(t *testing.T) {
	r, _, tuned := diagnoseSpec(t, `source:
  range: {stop: 100000000}
ops:
  - cost: {sleep_us: 2000}
  - cost: {cpu_us: 700}
  - batch: {size: 4}
`, "--cores", "2")
	if r.BoundingOp != "cost" || !(r.Ops[1].CriticalPathShare > r.Ops[2].CriticalPathShare) || r.Ops[2].CriticalPathShare <= 0 {
		t.Fatalf("bounding op %q, shares %.2f %.2f: want the wait (ops[0]), sharing its goroutine with the CPU work",
			r.BoundingOp, r.Ops[1].CriticalPathShare, r.Ops[2].CriticalPathShare)
	}
	if len(tuned.Ops) < 4 || tuned.Ops[0].Cost == nil || tuned.Ops[0].Cost.SleepMicros == 0 || tuned.Ops[1].Prefetch == nil {
		t.Errorf("rewritten ops %+v: want a prefetch right after the wait", tuned.Ops)
	}
	if !(r.RecommendedPredictedElementsPerSecond > 1.15*r.PredictedElementsPerSecond) {
		t.Errorf("predicted %v → %v: want the overlap to gain", r.PredictedElementsPerSecond, r.RecommendedPredictedElementsPerSecond)
	}
}

func TestDiagnoseTable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(path, []byte("source:\n  range: {stop: 2000}\nops:\n  - cost: {cpu_us: 50}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd(t, "diagnose", path, "--seconds", "5", "--memory", "1MiB")
	if code != 0 {
		t.Fatalf("exited %d: %s", code, errOut)
	}
	for _, want := range []string{"outputs/s measured", "*  ops[0] cost", "bounds throughput: ops[0] cost", "recommended (Plumber's LP", "cache: after ops[0] cost: 16.0 KB per epoch"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDiagnoseErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(good, []byte("source:\n  range: {stop: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("source:\n  range: {stop: 10}\nops:\n  - shuffle: {bufer: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diagnose"}, "want one SPEC file, or --job NAME"},
		{[]string{"diagnose", good, good}, "want one SPEC file, or --job NAME"},
		{[]string{"diagnose", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"diagnose", bad}, `unknown field "bufer"`},
		{[]string{"diagnose", good, "--cores", "0"}, "--cores must be"},
		{[]string{"diagnose", good, "--seconds", "-1"}, "--seconds must be"},
		{[]string{"diagnose", good, "--memory", "lots"}, "--memory: want a byte count"},
		{[]string{"diagnose", good, "--write", "out.json"}, "give a .yaml"},
	} {
		_, errOut, code := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1000": 1000, "500MB": 500e6, "2GiB": 2 << 30, "1.5 kb": 1500, "64KiB": 64 << 10, "7B": 7} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "x", "1e30GB", "NaN"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
}

// BenchmarkDiagnoseRewrite measures the goal on the misconfigured
// pipelines of pipeline/diagnose/testdata: each is diagnosed (5 s), then
// the original and the --write output each run for about 5 s. It reports
// outputs (batches) per second of both, the rewrite's predicted
// throughput, and the prediction's error against what the rewrite
// measured. Run it alone: go test ./cmd/feedmesh -run '^$' -bench
// DiagnoseRewrite -benchtime 1x. The waits in these specs stand in for CPU
// work, so that --cores 8 can be emulated on 2 cores.
func BenchmarkDiagnoseRewrite(b *testing.B) {
	for _, c := range []struct {
		name  string
		cores string
	}{
		{"expensive_map", "8"},
		{"prefetch_starved", "2"},
		{"wrong_op_parallel", "8"},
	} {
		b.Run(c.name, func(b *testing.B) {
			spec := filepath.Join("..", "..", "pipeline", "diagnose", "testdata", c.name+".yaml")
			tunedPath := filepath.Join(b.TempDir(), "tuned.yaml")
			for range b.N {
				var out, errb strings.Builder
				if code := run(b.Context(), []string{"diagnose", spec, "--cores", c.cores, "--seconds", "5", "--json", "--write", tunedPath}, &out, &errb); code != 0 {
					b.Fatalf("diagnose exited %d: %s", code, errb.String())
				}
				var r diagnoseJSON
				if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
					b.Fatal(err)
				}
				measure := func(path string, perSecond float64) float64 {
					s, err := pipeline.LoadFile(path)
					if err != nil {
						b.Fatal(err)
					}
					rep, err := pipeline.RunLocal(b.Context(), s, pipeline.RunOptions{Take: max(int64(5*perSecond), 20)})
					if err != nil {
						b.Fatal(err)
					}
					return float64(rep.Batches) / rep.Seconds
				}
				before := measure(spec, r.PredictedElementsPerSecond)
				after := measure(tunedPath, r.RecommendedPredictedElementsPerSecond)
				b.ReportMetric(before, "original_outputs/s")
				b.ReportMetric(after, "rewritten_outputs/s")
				b.ReportMetric(r.RecommendedPredictedElementsPerSecond, "predicted_outputs/s")
				b.ReportMetric(100*(r.RecommendedPredictedElementsPerSecond-after)/after, "prediction_error_%")
			}
		})
	}
}
