package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// `feedmesh diagnose --job` on a running DYNAMIC job: the workers'
// statistics name the cost map as the bound, and --write rewrites the
// job's spec file the same way `diagnose SPEC` does.
func TestDiagnoseJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3)
	addr := c.Node(1).Addr()
	const text = `source:
  range: {stop: 100000000, split_size: 200}
ops:
  - map: {fn: cast, args: {tensor: value, dtype: float32}}
  - map: {fn: cost, args: {cpu_us: 400}}
  - batch: {size: 8}
`
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := pipeline.ParseYAML([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "diag", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for i := 0; i < 60; i++ { // enough for every worker to have run a while
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, code := runCmd(t, "diagnose", "--job", "diag", "--addr", addr, "--json", "--cores", "2")
	if code != 0 {
		t.Fatalf("diagnose --job exited %d: %s", code, errOut)
	}
	var r struct {
		diagnoseJSON
		Job             string   `json:"job"`
		Workers         []string `json:"workers"`
		PipelineSeconds float64  `json:"pipeline_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Job != "diag" || len(r.Workers) == 0 || r.PipelineSeconds <= 0 || len(r.Ops) != 4 {
		t.Fatalf("job %q, workers %v, %v s, %d ops: %s", r.Job, r.Workers, r.PipelineSeconds, len(r.Ops), out)
	}
	if r.BoundingOp != "map(cost)" || r.Ops[2].RecommendedParallelism < 2 {
		t.Errorf("bounding op %q, cost map recommended parallelism %d: want map(cost), >= 2\n%s", r.BoundingOp, r.Ops[2].RecommendedParallelism, out)
	}
	if r.Ops[2].ElementsPerSecond <= 0 || r.Ops[2].CPUSecondsPerElement < 300e-6 {
		t.Errorf("cost map row %+v: want a rate and >= 300 µs of CPU per element", r.Ops[2])
	}

	// `feedmesh top` shows the job, its workers and its bounding op; the
	// second frame has a rate.
	out, errOut, code = runCmd(t, "top", "--addr", addr, "--iterations", "2", "--interval", "200ms")
	if code != 0 {
		t.Fatalf("top exited %d: %s", code, errOut)
	}
	frames := strings.Split(out, "JOB ")
	if len(frames) != 3 || !strings.Contains(frames[2], "ops[1] map(cost)") {
		t.Fatalf("top: want 2 frames, the second naming ops[1] map(cost):\n%s", out)
	}
	var row []string
	for _, line := range strings.Split(frames[2], "\n") {
		if f := strings.Fields(line); len(f) > 6 && f[0] == "diag" {
			row = f
		}
	}
	if row == nil || row[1] != "running" {
		t.Fatalf("top: no running row for diag:\n%s", out)
	}
	if _, err := strconv.ParseFloat(row[6], 64); err != nil {
		t.Errorf("top: the second frame's BATCHES/S for diag is %q, want a rate:\n%s", row[6], out)
	}

	// The table, and --write of the job's spec file.
	tuned := filepath.Join(dir, "tuned.yaml")
	out, errOut, code = runCmd(t, "diagnose", "--job", "diag", "--addr", addr, specPath, "--cores", "2", "--write", tuned)
	if code != 0 {
		t.Fatalf("diagnose --job SPEC --write exited %d: %s", code, errOut)
	}
	if !strings.Contains(out, "job diag: statistics of") || !strings.Contains(out, "* bounds throughput: ops[1] map(cost)") {
		t.Errorf("table:\n%s", out)
	}
	rewritten, err := pipeline.LoadFile(tuned)
	if err != nil {
		t.Fatalf("the --write output does not load: %v", err)
	}
	found := false
	for _, op := range rewritten.Ops {
		if op.Map != nil && op.Map.Fn == "cost" {
			found = true
			if op.Map.Parallelism < 2 {
				t.Errorf("rewritten cost map parallelism %d, want >= 2", op.Map.Parallelism)
			}
		}
	}
	if !found {
		t.Errorf("no cost map in the rewritten spec: %+v", rewritten.Ops)
	}

	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte("source:\n  range: {stop: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diagnose", "--job", "nosuch", "--addr", addr}, `"nosuch"`},
		{[]string{"diagnose", "--job", "diag", "--addr", addr, other}, "give the spec the job was started from"},
		{[]string{"diagnose", "--job", "diag", "--addr", addr, "--write", tuned}, "needs the SPEC file"},
		{[]string{"diagnose", "--job", "diag", "--addr", addr, "--seconds", "1"}, "--seconds runs SPEC here"},
		{[]string{"diagnose", specPath, "--addr", addr}, "--addr reaches a node"},
	} {
		_, errOut, code := runCmd(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
}
