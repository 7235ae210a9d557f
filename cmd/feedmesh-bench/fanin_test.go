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

// faninHelperEnv makes TestFaninHelperProcess act as feedmesh-bench: the bench's
// client process, when the bench runs inside this test binary.
const faninHelperEnv = "GO_FEEDMESH_FANIN_HELPER"

// TestFaninHelperProcess is not a test: run by the fanin bench (under
// TestBenchFanin) with the helper variable set, it runs the feedmesh-bench command
// line that follows "--" and exits with its code.
func TestFaninHelperProcess(t *testing.T) {
	if os.Getenv(faninHelperEnv) != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
}

func useTestBinaryAsClient(t *testing.T) {
	prev := faninClientCommand
	faninClientCommand = helperProcessCommand("fanin", faninClientFlag)
	t.Cleanup(func() { faninClientCommand = prev })
}

// helperProcessCommand starts this test binary as `feedmesh-bench bench
// flag ARGS…` (TestFaninHelperProcess runs any feedmesh-bench command line):
// what a benchmark that starts a process of its own runs under test.
func helperProcessCommand(bench, flag string) func(ctx context.Context, args []string) (*exec.Cmd, error) {
	return func(ctx context.Context, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestFaninHelperProcess$", "--", bench, flag}, args...)...)
		cmd.Env = append(os.Environ(), faninHelperEnv+"=1")
		return cmd, nil
	}
}

func TestBenchFanin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters of 1 and 2 nodes and a client process (a few seconds)")
	}
	useTestBinaryAsClient(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"fanin", "--workers", "1,2", "--seconds", "0.5", "--batch-bytes", "262144", "--rows", "4", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out.String())
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want one per worker count (1, 2):\n%s", len(rows), out.String())
	}
	for i, want := range []float64{1, 2} {
		r := rows[i]
		if r["workers"] != want {
			t.Errorf("row %d: workers %v, want %v", i, r["workers"], want)
		}
		for _, k := range []string{"mb_per_s", "batches_per_s", "client_cpu_s_per_gb", "rss_before_mb", "rss_max_mb", "rss_median_mb", "peak_rss_mb", "heap_max_mb", "bound_mb", "seconds"} {
			if v, ok := r[k].(float64); !ok || !(v > 0) {
				t.Errorf("row %d: %s = %v, want > 0", i, k, r[k])
			}
		}
		if v, ok := r["pool_max_mb"].(float64); !ok || v < 0 {
			t.Errorf("row %d: pool_max_mb = %v, want >= 0", i, r["pool_max_mb"])
		}
		if r["serving"] != want {
			t.Errorf("row %d: %v of %v workers delivered batches in the window", i, r["serving"], want)
		}
		// Batches carry 4 records of 64 KiB plus ids and offsets.
		if mb, ok := r["mean_batch_bytes"].(float64); !ok || mb < 262144 || mb > 262144+128 {
			t.Errorf("row %d: mean batch %v bytes, want 262144 plus a few", i, r["mean_batch_bytes"])
		}
		if mbps, bps := r["mb_per_s"].(float64), r["batches_per_s"].(float64); mbps < bps*0.262 || mbps > bps*0.263 {
			t.Errorf("row %d: %v MB/s does not match %v batches/s of 256 KiB", i, mbps, bps)
		}
		if rss, med, peak, before := r["rss_max_mb"].(float64), r["rss_median_mb"].(float64), r["peak_rss_mb"].(float64), r["rss_before_mb"].(float64); med > rss || before > peak {
			t.Errorf("row %d: RSS median %v MiB above its max %v MiB, or RSS before the job %v MiB above the peak %v MiB", i, med, rss, before, peak)
		}
	}
	if !strings.Contains(errb.String(), "k=2: starting 2 in-process nodes") {
		t.Errorf("no progress on stderr:\n%s", errb.String())
	}
}

func TestBenchFaninFlags(t *testing.T) {
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"fanin", "--help"}, &bytes.Buffer{}, &errb); code != 0 || !strings.Contains(errb.String(), "Usage: feedmesh-bench fanin") {
		t.Errorf("--help: code %d\n%s", code, errb.String())
	}
	if strings.Contains(errb.String(), faninClientFlag) {
		t.Errorf("--help lists the hidden %s mode", faninClientFlag)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "0"}, `--workers: "0" is not a count`},
		{[]string{"--workers", "two"}, `--workers: "two"`},
		{[]string{"--workers", ","}, "no worker counts"},
		{[]string{"--batch-bytes", "-1"}, "--batch-bytes: -1"},
		{[]string{"--batch-bytes", "1073741824"}, "--batch-bytes"},
		{[]string{"--seconds", "0"}, "--seconds"},
		{[]string{"--rows", "0"}, "--rows"},
		{[]string{"--batch-bytes", "8", "--rows", "16"}, "--rows"},
		{[]string{"--sharding", "static"}, "--sharding"},
		{[]string{"--window", "0"}, "--window"},
		{[]string{"--prefetch-bytes", "0"}, "--prefetch-bytes"},
		{[]string{"--step-ms", "-1"}, "--step-ms"},
		{[]string{"--client-gogc", "-5"}, "--client-gogc"},
		{[]string{"--warmup", "-1"}, "--warmup"},
		{[]string{faninClientFlag, "--seconds", "1"}, "needs --addr"},
	} {
		var errb bytes.Buffer
		code := run(context.Background(), append([]string{"fanin"}, tc.args...), &bytes.Buffer{}, &errb)
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q; want an error naming %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

func TestProcStatusBytes(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	rss, err := procStatusBytes("VmRSS")
	if err != nil || rss <= 0 {
		t.Fatalf("VmRSS: %d, %v", rss, err)
	}
	if _, err := procStatusBytes("NoSuchField"); err == nil {
		t.Errorf("a missing field gave no error")
	}
	if median([]int64{5, 1, 3, 2}) != 2 || slicesMax([]int64{5, 1, 3}) != 5 || median[int64](nil) != 0 {
		t.Errorf("median/slicesMax")
	}
}
