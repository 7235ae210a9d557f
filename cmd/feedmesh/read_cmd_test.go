package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/testcluster"
)

// `feedmesh read` on a 3-node cluster: the default sharding reads the
// dataset once (it used to be off: three copies, without a word); off says
// how many copies it delivered; reading a job that has run to its end
// fails, saying so, instead of quietly delivering nothing. Each read shows
// the offload and workers decision in one line on stderr (issue 42).
func TestReadShardingAndNotes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3)
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 3000, split_size: 100}\nops:\n  - batch: {size: 50}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr string
	read := func(job string, extra ...string) readSummary {
		t.Helper()
		args := append([]string{"read", "--addr", c.Node(1).Addr(), "--spec", spec, "--job", job, "--json", "--progress=false", "--offload", "remote"}, extra...)
		out, errOut, code := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v exited %d: %s", args, code, errOut)
		}
		var s readSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		stderr = errOut
		return s
	}
	once := read("once")
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") ||
		!strings.Contains(lines[0], `job \"once\": offload remote; workers all`) || !strings.Contains(lines[0], "reason=") {
		t.Errorf("stderr %q: want one INFO line with the offload and workers decision", stderr)
	}
	if once.Elements != 3000 || once.Note != "" {
		t.Errorf("default sharding: %d elements, note %q; want the dataset once (3000), no note", once.Elements, once.Note)
	}
	if !(once.StallFraction > 0 && once.StallFraction <= 1) || !(once.BatchTimeSeconds > 0) {
		t.Errorf("stall %v, batch time %v s: want a fraction in (0, 1] and a time", once.StallFraction, once.BatchTimeSeconds)
	}
	var perWorker int64
	for _, w := range once.PerWorker {
		perWorker += w.Elements
	}
	if perWorker != once.Elements {
		t.Errorf("per_worker elements sum to %d, total %d", perWorker, once.Elements)
	}
	// Reading a job that has run to its end again fails, saying so (it
	// exited 0 with 0 elements and a note before: issue 38, item 2).
	out, errOut, code := runCmd(t, "read", "--addr", c.Node(2).Addr(), "--spec", spec, "--job", "once", "--json", "--progress=false", "--offload", "remote")
	if code == 0 || !strings.Contains(errOut, "job finished") || !strings.Contains(errOut, "another job name") {
		t.Errorf("reading a finished job again: exit %d, stdout %q, stderr %q; want a failure saying the job finished and to use another name", code, out, errOut)
	}
	// One split and three workers: two idle, and read says so (it said
	// nothing before: issue 38, item 2).
	one := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(one, []byte("source:\n  range: {stop: 3000, split_size: 3000}\nops:\n  - batch: {size: 50}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCmd(t, "read", "--addr", c.Node(1).Addr(), "--spec", one, "--job", "one-split", "--json", "--progress=false", "--offload", "remote", "--workers", "all")
	var few readSummary
	if code != 0 || json.Unmarshal([]byte(out), &few) != nil {
		t.Fatalf("read of one split: exit %d: %s %s", code, out, errOut)
	}
	if len(few.Warnings) != 1 || !strings.Contains(few.Warnings[0], "1 split(s)") || !strings.Contains(few.Warnings[0], "split_bytes") || !strings.Contains(errOut, "WARN") {
		t.Errorf("one split, 3 workers: warnings %q, stderr %q; want the few-splits warning in both", few.Warnings, errOut)
	}
	off := read("copies", "--sharding", "off")
	if off.Elements != 3000*int64(off.Workers) || !strings.Contains(off.Note, "copies") {
		t.Errorf("sharding off: %d elements from %d workers, note %q", off.Elements, off.Workers, off.Note)
	}
}

func TestReadNote(t *testing.T) {
	old := &api.JobInfo{Name: "j", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, tc := range []struct {
		s        readSummary
		existing *api.JobInfo
		sh       jobspec.Sharding
		want     string
	}{
		{readSummary{Job: "j", Elements: 10, Workers: 3}, nil, jobspec.Dynamic, ""},
		{readSummary{Job: "j", Elements: 10, Workers: 3}, old, jobspec.Dynamic, ""}, // joined a running job
		{readSummary{Job: "j", Elements: 0, Workers: 0}, old, jobspec.Dynamic, "2026-01-02T03:04:05Z"},
		{readSummary{Job: "j", Elements: 0}, nil, jobspec.Dynamic, ""}, // an empty dataset, freshly created
		{readSummary{Job: "j", Elements: 30, Workers: 3}, nil, jobspec.Off, "3 copies"},
		{readSummary{Job: "j", Elements: 10, Workers: 1}, nil, jobspec.Off, ""},
		{readSummary{Job: "j", Elements: 90, Workers: 2, SplitsLost: 2, NumSplits: 50}, nil, jobspec.Dynamic, "2 of the dataset's 50 splits were lost"},
		{readSummary{Job: "j", Elements: 90, Workers: 2, NumSplits: 50}, nil, jobspec.Dynamic, ""},
		{readSummary{Job: "j", Elements: 90, Workers: 2, SplitsLost: 2, NumSplits: 50, LossCounted: true, ElementsLost: 7}, nil, jobspec.Dynamic, "data lost: 7 elements, of 2 splits"},
		{readSummary{Job: "j", Elements: 90, Workers: 2, SplitsLost: 1, NumSplits: 50, LossCounted: true}, nil, jobspec.Dynamic, ""}, // its elements all arrived
		{readSummary{Job: "j", Elements: 90, Workers: 2, NumSplits: 50, LossCounted: true, Reconnects: 2, Delivery: jobspec.AtMostOnce}, nil, jobspec.Dynamic, ""},
	} {
		got := readNote(tc.s, tc.existing, tc.sh)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("readNote(%+v, %v, %s) = %q, want one containing %q", tc.s, tc.existing != nil, tc.sh, got, tc.want)
		}
	}
}

// A deterministic read's summary says its reorder buffer and its audit,
// and an audit that differs says so.
func TestReadSummaryDeterministic(t *testing.T) {
	var b strings.Builder
	printReadSummary(&b, readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1,
		Reorder: &client.ReorderStats{Peak: 3, Bound: 64, Skipped: 2},
		Audit: []client.EpochAudit{{Epoch: 0, Elements: 90, Digest: "aa", Complete: true, Expected: "aa", Match: true},
			{Epoch: 1, Elements: 89, Digest: "bb", Complete: true, Expected: "cc"}, {Epoch: 2, Elements: 3, Digest: "dd"}}})
	for _, want := range []string{"reorder buffer peak 3 of 64 batches, 2 skipped",
		"audit: epoch 0: 90 elements, digest aa, matches", "audit: epoch 1: 89 elements, digest bb, DIFFERS from the layout's digest of the epoch cc",
		"audit: epoch 2: 3 elements, digest dd, incomplete"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary without %q:\n%s", want, b.String())
		}
	}
}

// The summary says how much was lost; JSON always has splits_lost.
func TestReadSummaryReportsLoss(t *testing.T) {
	var b strings.Builder
	printReadSummary(&b, readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1, SplitsLost: 2, NumSplits: 50, Note: "n"})
	if !strings.Contains(b.String(), "lost: 2 of 50 splits") {
		t.Errorf("summary without the loss:\n%s", b.String())
	}
	b.Reset()
	printReadSummary(&b, readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1, SplitsLost: 2, NumSplits: 50, LossCounted: true, ElementsLost: 7, JobState: api.JobFinished})
	if !strings.Contains(b.String(), "lost: 7 elements, of 2 splits not read again") || strings.Contains(b.String(), "so far") {
		t.Errorf("summary without the loss in elements:\n%s", b.String())
	}
	b.Reset()
	printReadSummary(&b, readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1, SplitsLost: 2, NumSplits: 50, LossCounted: true, ElementsLost: 7, JobState: api.JobRunning})
	if !strings.Contains(b.String(), "lost: 7 elements so far (the job is running") {
		t.Errorf("summary of a count not final:\n%s", b.String())
	}
	b.Reset()
	printReadSummary(&b, readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1, NumSplits: 50})
	if strings.Contains(b.String(), "lost") {
		t.Errorf("summary reports a loss that did not happen:\n%s", b.String())
	}
	// Exactly-once: splits of a worker that died at the end, not read again.
	b.Reset()
	sum := readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1, NumSplits: 50, Orphaned: 3}
	sum.Note = readNote(sum, nil, jobspec.Dynamic)
	printReadSummary(&b, sum)
	if !strings.Contains(b.String(), "not read again: 3 splits") || !strings.Contains(b.String(), "note: data may be missing: 3 splits") {
		t.Errorf("summary without the orphaned splits:\n%s", b.String())
	}
	// At-most-once: a worker dropped mid-stream with no split counted lost
	// is still said.
	b.Reset()
	sum = readSummary{Job: "j", Batches: 9, Elements: 90, Seconds: 1, NumSplits: 50, WorkersDropped: 1, Delivery: jobspec.AtMostOnce}
	sum.Note = readNote(sum, nil, jobspec.Dynamic)
	printReadSummary(&b, sum)
	if !strings.Contains(b.String(), "workers dropped: 1") || !strings.Contains(b.String(), "note: data may be lost") {
		t.Errorf("summary without the dropped worker:\n%s", b.String())
	}
	js, err := json.Marshal(readSummary{Job: "j", JobState: api.JobFinished})
	if err != nil || !strings.Contains(string(js), `"splits_lost":0`) || !strings.Contains(string(js), `"job_state":"finished"`) {
		t.Errorf("json %s, %v", js, err)
	}
}

func TestProgressTo(t *testing.T) {
	if p := progressTo(false, true, os.Stderr); p.w != nil {
		t.Errorf("progress off: %+v", p)
	}
	if p := progressTo(true, true, os.Stderr); p.start != "\r" || p.end != "" || p.every != 250*time.Millisecond {
		t.Errorf("terminal: %+v", p)
	}
	if p := progressTo(true, false, os.Stderr); p.start != "" || p.end != "\n" || p.every != time.Second {
		t.Errorf("not a terminal: %+v", p)
	}
}

func TestWorkersColumn(t *testing.T) {
	j := api.JobInfo{Workers: []api.WorkerInfo{{Name: "a"}, {Name: "b", Expired: true}, {Name: "c", Drained: true}, {Name: "d", Expired: true, Drained: true}}}
	if got := workersColumn(j); got != "1 (2 expired, 1 drained)" {
		t.Errorf("workers column %q", got)
	}
	if got := workersColumn(api.JobInfo{Workers: []api.WorkerInfo{{Name: "a"}}}); got != "1 (0 expired)" {
		t.Errorf("workers column %q", got)
	}
	auto := api.JobInfo{Options: api.JobOptions{Workers: jobspec.AutoWorkers}, Workers: []api.WorkerInfo{{Name: "a"}, {Name: "b", Dismissed: true}}}
	if got := workersColumn(auto); got != "auto:1 (0 expired, 0 drained, 1 dismissed)" {
		t.Errorf("workers column %q", got)
	}
}

// The per-worker figures of `read` count a worker's batches and its
// elements apart: a job cut after its first op (--offload-boundary 1)
// ships single elements, which count as each worker's elements (all cut),
// not as its batches (this reader made the batches); before, every
// element counted as one of the worker's "batches". The text summary
// shows the CUT column then.
func TestReadPerWorkerCountsUnderCut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3)
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 1200, split_size: 20}\nops:\n  - cost: {sleep_us: 50}\n  - batch: {size: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"read", "--addr", c.Node(1).Addr(), "--spec", spec, "--job", "cut-counts", "--json", "--progress=false", "--workers", "all", "--offload-boundary", "1"}
	out, errOut, code := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("%v exited %d: %s", args, code, errOut)
	}
	var s readSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	if s.Elements != 1200 || s.Batches < 120 || s.Offload == nil || s.Offload.Cut != 1 {
		t.Fatalf("%d elements in %d batches, offload %+v; want 1200 in at least 120, cut after 1 op", s.Elements, s.Batches, s.Offload)
	}
	var elements, cut int64
	for w, ws := range s.PerWorker {
		elements += ws.Elements
		cut += ws.CutElements
		if ws.Batches != 0 || ws.CutElements != ws.Elements || ws.Elements == 0 {
			t.Errorf("worker %s: %+v; want no batch, its elements all cut", w, ws)
		}
	}
	if elements != 1200 || cut != 1200 {
		t.Errorf("per_worker: %d elements, %d cut; want 1200 and 1200: %s", elements, cut, out)
	}
	var b strings.Builder
	printReadSummary(&b, s)
	header := ""
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "WORKER") {
			header = strings.Join(strings.Fields(l), " ")
		}
	}
	if header != "WORKER BATCHES ELEMENTS CUT MB MB/s" {
		t.Errorf("the summary of a cut job: header %q, want a CUT column:\n%s", header, b.String())
	}
}
