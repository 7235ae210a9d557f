package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The python benchmark needs python3 with numpy (and torch for its
// dataloader workload) and cgo. As cmd/libfeedmesh's TestPython does, the
// test skips without them and says what to install, unless
// FEEDMESH_REQUIRE_PYTHON=1 (CI), where it fails instead.
func pySkipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("FEEDMESH_REQUIRE_PYTHON") == "1" {
		t.Fatalf(format+" (FEEDMESH_REQUIRE_PYTHON=1)", args...)
	}
	t.Skipf(format, args...)
}

func testPython() string {
	if p := os.Getenv("FEEDMESH_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// useTestBinaryAsGoReader makes the benchmark start this test binary as its
// Go reader (TestFaninHelperProcess runs any feedmesh-bench command line).
func useTestBinaryAsGoReader(t *testing.T) {
	prev := pyGoReaderCommand
	pyGoReaderCommand = helperProcessCommand("python", pyGoReaderFlag)
	t.Cleanup(func() { pyGoReaderCommand = prev })
}

func TestBenchPython(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the library, starts a cluster and Python processes (about 15 s)")
	}
	py := testPython()
	if msg := pyCheckImport(context.Background(), py, "numpy"); msg != "" {
		pySkipOrFail(t, "%s: apt-get install python3-numpy python3-torch, or set FEEDMESH_PYTHON", msg)
	}
	if out, err := exec.Command(goCommand(), "env", "CGO_ENABLED").Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		pySkipOrFail(t, "cgo is off (no C compiler?): the library needs it (apt-get install gcc)")
	}
	useTestBinaryAsGoReader(t)
	out, errOut, code := runCmd(t, "python", "--python", py, "--runs", "1", "--warmup", "0.1", "--seconds", "0.3",
		"--raw-batch-bytes", "262144", "--raw-rows", "4", "--dataloader-lines", "2000", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	type key struct{ workload, client string }
	got := map[key]map[string]any{}
	for _, r := range rows {
		w, _ := r["workload"].(string)
		c, _ := r["client"].(string)
		got[key{w, c}] = r
	}
	want := []key{{"text", "go"}, {"text", "python"}, {"raw", "go"}, {"raw", "python"}}
	// Without torch the benchmark skips the dataloader workload, and says so.
	noTorch := strings.Contains(errOut, "the dataloader workload is skipped")
	if !noTorch {
		want = append(want, key{"dataloader", "dataloader-0"}, key{"dataloader", "dataloader-2"}, key{"dataloader", "feedmesh"})
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d (%v):\n%s", len(rows), len(want), want, out)
	}
	for _, k := range want {
		r, ok := got[k]
		if !ok {
			t.Fatalf("no row for %v:\n%s", k, out)
		}
		ratio := "ratio_vs_go"
		if k.workload == "dataloader" {
			ratio = "ratio_vs_feedmesh"
		}
		for _, f := range []string{"batches_per_s", "client_cpu_s_per_gb", ratio} {
			if v, ok := r[f].(float64); !ok || !(v > 0) {
				t.Errorf("%v: %s = %v, want > 0", k, f, r[f])
			}
		}
		if len(r) != 5 {
			t.Errorf("%v: fields %v, want workload, client, batches_per_s, client_cpu_s_per_gb, %s", k, r, ratio)
		}
	}
	for _, k := range []key{{"text", "go"}, {"raw", "go"}, {"dataloader", "feedmesh"}} {
		if r, ok := got[k]; ok {
			f := "ratio_vs_go"
			if k.workload == "dataloader" {
				f = "ratio_vs_feedmesh"
			}
			if r[f] != 1.0 {
				t.Errorf("%v: %s = %v, want 1", k, f, r[f])
			}
		}
	}
	if !strings.Contains(errOut, "building the Python package's library") || !strings.Contains(errOut, "text run 0 python") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	if noTorch {
		pySkipOrFail(t, "%s cannot import torch, the dataloader workload was skipped (the others passed): apt-get install python3-torch", py)
	}
}

func TestBenchPythonFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workloads", "images"}, `--workloads: "images"`},
		{[]string{"--workloads", ","}, "--workloads: none"},
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--seconds", "0"}, "--seconds"},
		{[]string{"--raw-batch-bytes", "0"}, "--raw-batch-bytes"},
		{[]string{"--raw-rows", "0"}, "--raw-rows"},
		{[]string{"--dataloader-lines", "0"}, "--dataloader-lines"},
		{[]string{pyGoReaderFlag, "--seconds", "1"}, "needs --addr"},
	} {
		var errb bytes.Buffer
		code := run(context.Background(), append([]string{"python"}, tc.args...), &bytes.Buffer{}, &errb)
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q; want an error naming %q", tc.args, code, errb.String(), tc.want)
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"python", "--help"}, &bytes.Buffer{}, &errb); code != 0 || strings.Contains(errb.String(), pyGoReaderFlag) {
		t.Errorf("--help: code %d, or it lists the hidden %s mode:\n%s", code, pyGoReaderFlag, errb.String())
	}
}

// A missing interpreter is a skip with a message, not a failure.
func TestBenchPythonMissingInterpreter(t *testing.T) {
	out, errOut, code := runCmd(t, "python", "--python", "/nonexistent/python3", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" || !strings.Contains(errOut, "python: skipped") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
