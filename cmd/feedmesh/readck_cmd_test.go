package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/testcluster"
)

// read --take K --checkpoint (and --dump), then read --resume --dump on
// another node: the two dumps hold the dataset exactly once. A corrupted
// checkpoint, or one of another job, is refused with exit code 2 and
// creates nothing.
func TestReadCheckpointAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	const n, take = 3000, 40
	c := testcluster.Start(t, 3)
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 3000, split_size: 100}\nops:\n  - batch: {size: 20}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, part1, part2 := filepath.Join(dir, "ck.bin"), filepath.Join(dir, "part1.jsonl"), filepath.Join(dir, "part2.jsonl")
	read := func(node int, extra ...string) readSummary {
		t.Helper()
		args := append([]string{"read", "--addr", c.Node(node).Addr(), "--spec", spec, "--job", "ck", "--sharding", "dynamic", "--json", "--progress=false", "--offload", "remote"}, extra...)
		out, errOut, code := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v exited %d: %s", args, code, errOut)
		}
		var s readSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		return s
	}

	first := read(0, "--take", "40", "--checkpoint", ck, "--dump", part1)
	st, err := os.Stat(ck)
	if err != nil {
		t.Fatal(err)
	}
	if first.Stopped != "take" || first.Batches != take || first.Checkpoint != ck || int64(first.CheckpointBytes) != st.Size() || first.Dumped != first.Elements || first.Elements != 20*take {
		t.Fatalf("first read: %+v (checkpoint file %d bytes)", first, st.Size())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".ck.bin.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	good, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x40
	corrupt := filepath.Join(dir, "corrupt.bin")
	if err := os.WriteFile(corrupt, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	noDump := filepath.Join(dir, "never.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--job", "ck", "--resume", corrupt}, "bad checkpoint: corrupted"},
		{[]string{"--job", "other", "--resume", ck}, `bad checkpoint: it is of job "ck", not "other"`},
		{[]string{"--job", "ck", "--epochs", "2", "--resume", ck}, "1 epochs, not 2"},
	} {
		args := append([]string{"read", "--addr", c.Node(1).Addr(), "--spec", spec, "--progress=false", "--dump", noDump, "--offload", "remote"}, tc.args...)
		_, errOut, code := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, "--resume") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and an error saying %q", tc.args, code, errOut, tc.want)
		}
		if _, err := os.Stat(noDump); err == nil {
			t.Errorf("%v: the dump file was left behind", tc.args)
		}
	}

	second := read(1, "--resume", ck, "--dump", part2)
	if second.Stopped != "end" || second.ResumedFrom != ck || second.Dumped != second.Elements {
		t.Errorf("resumed read: %+v", second)
	}
	counts := map[int64]int{}
	for _, v := range append(jobtest.DumpValues(t, part1), jobtest.DumpValues(t, part2)...) {
		counts[v]++
	}
	for v := range int64(n) {
		if counts[v] != 1 {
			t.Errorf("element %d read %d times", v, counts[v])
		}
		delete(counts, v)
	}
	if len(counts) > 0 {
		t.Errorf("elements not in the dataset: %v", counts)
	}
	t.Logf("first read %d elements (%d-byte checkpoint), resumed read %d", first.Elements, first.CheckpointBytes, second.Elements)
}

// --checkpoint and --resume need an exactly-once job; the flags are
// checked before anything is created or dialed (--addr leads nowhere).
func TestReadCheckpointFlags(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 100}\nops:\n  - batch: {size: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, dump, empty := filepath.Join(dir, "ck.bin"), filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "empty.bin")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"read", "--addr", "127.0.0.1:1", "--timeout", "1s", "--spec", spec, "--job", "j", "--dump", dump}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--delivery", "at-most-once", "--checkpoint", ck}, "--checkpoint: only exactly-once jobs checkpoint and resume"},
		{[]string{"--delivery", "at-most-once", "--checkpoint", ck}, "delivery at-most-once"},
		{[]string{"--share", "--checkpoint", ck}, "with --share"},
		{[]string{"--sharding", "off", "--checkpoint", ck}, "sharding off"},
		{[]string{"--sharding", "static", "--resume", ck}, "--resume: only exactly-once"},
		{[]string{"--checkpoint", filepath.Join(dir, "no-such-dir", "ck.bin")}, "no such file or directory"},
		{[]string{"--resume", filepath.Join(dir, "missing.bin")}, "--resume: open"},
		{[]string{"--resume", empty}, "bad checkpoint: the file is empty"},
		{[]string{"--take", "-1"}, "--take -1: want N >= 1"},
	} {
		_, errOut, code := runCmd(t, append(base, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and an error saying %q", tc.args, code, errOut, tc.want)
		}
		for _, f := range []string{ck, dump} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%v: created %s", tc.args, f)
			}
		}
	}
}

// The dump splits batches into rows, cuts padded tensors to their
// lengths (and leaves the lengths out), writes bytes as strings or base64
// and non-finite floats as strings; an unbatched spec's elements are
// written whole.
func TestDumpElements(t *testing.T) {
	ints := func(name string, shape []int64, v ...int32) tensor.Tensor {
		x, err := tensor.FromInt32s(name, shape, v)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	floats := func(name string, shape []int64, v ...float32) tensor.Tensor {
		x, err := tensor.FromFloat32s(name, shape, v)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	nan := float32(0)
	nan /= nan
	padded := tensor.Element{Tensors: []tensor.Tensor{
		ints("tokens", []int64{2, 3}, 1, 2, 0, 3, 4, 5),
		floats("w", []int64{2}, 0.5, nan),
		tensor.BytesVector("text", [][]byte{[]byte("hé \"x\"\n"), {0xff, 0xfe}}),
		ints("tokens_length", []int64{2}, 2, 3),
	}}
	for _, tc := range []struct {
		spec *pipeline.Spec
		e    tensor.Element
		want string
	}{
		{&pipeline.Spec{Ops: []pipeline.Op{{PaddedBatch: &pipeline.PaddedBatchOp{Size: 2}}}}, padded,
			`{"tokens":[1,2],"w":0.5,"text":"hé \"x\"\n"}` + "\n" + `{"tokens":[3,4,5],"w":"NaN","text":"//4="}` + "\n"},
		// Without padded batching, a "_length" tensor is an ordinary one.
		{&pipeline.Spec{Ops: []pipeline.Op{{Batch: &pipeline.BatchOp{Size: 2}}}}, padded,
			`{"tokens":[1,2,0],"w":0.5,"text":"hé \"x\"\n","tokens_length":2}` + "\n" + `{"tokens":[3,4,5],"w":"NaN","text":"//4=","tokens_length":3}` + "\n"},
		{&pipeline.Spec{}, tensor.Element{Tensors: []tensor.Tensor{ints("m", []int64{2, 2}, 1, 2, 3, 4), tensor.ScalarInt64("v", -7)}},
			`{"m":[[1,2],[3,4]],"v":-7}` + "\n"},
	} {
		var out strings.Builder
		d, err := openDump("-", tc.spec, &out)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.write(tc.e); err != nil {
			t.Fatal(err)
		}
		if err := d.close(); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("dump:\n%s\nwant:\n%s", out.String(), tc.want)
		}
	}
	bad := tensor.Element{Tensors: []tensor.Tensor{ints("a", []int64{2}, 1, 2), ints("b", []int64{3}, 1, 2, 3)}}
	d, _ := openDump("-", &pipeline.Spec{Ops: []pipeline.Op{{Batch: &pipeline.BatchOp{Size: 2}}}}, &strings.Builder{})
	if err := d.write(bad); err == nil || !strings.Contains(err.Error(), "not a batch of 2 rows") {
		t.Errorf("ragged batch: %v", err)
	}
}

// SIGINT (the context's end) stops a read cleanly: exit 0, the dump
// flushed, the checkpoint written; a read resumed from it delivers none
// of the dumped elements again.
func TestReadInterruptedCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 2)
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 1000000, split_size: 1000}\nops:\n  - batch: {size: 100}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, part1, part2 := filepath.Join(dir, "ck.bin"), filepath.Join(dir, "part1.jsonl"), filepath.Join(dir, "part2.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // "Ctrl-C" once the dump has been flushed once
		for ctx.Err() == nil {
			if st, err := os.Stat(part1); err == nil && st.Size() > 0 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var out, errb bytes.Buffer
	args := []string{"read", "--addr", c.Node(0).Addr(), "--spec", spec, "--job", "intr", "--json", "--progress=false", "--checkpoint", ck, "--dump", part1, "--offload", "remote"}
	if code := run(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("interrupted read exited %d: %s", code, errb.String())
	}
	var s readSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := jobtest.DumpValues(t, part1)
	if s.Stopped != "interrupted" || s.CheckpointBytes == 0 || int64(len(got)) != s.Elements || s.Elements == 0 || s.Elements == 1000000 {
		t.Fatalf("interrupted read: %+v, %d elements in the dump", s, len(got))
	}
	if _, errOut, code := runCmd(t, "read", "--addr", c.Node(1).Addr(), "--spec", spec, "--job", "intr", "--progress=false",
		"--resume", ck, "--take", "50", "--dump", part2); code != 0 {
		t.Fatalf("resumed read exited %d: %s", code, errOut)
	}
	seen := map[int64]bool{}
	for _, v := range got {
		seen[v] = true
	}
	again := jobtest.DumpValues(t, part2)
	for _, v := range again {
		if seen[v] {
			t.Fatalf("element %d delivered before the checkpoint and again after it", v)
		}
	}
	if len(again) != 50*100 {
		t.Errorf("resumed read with --take 50 dumped %d elements, want 5000", len(again))
	}
}

// The text summary says why reading stopped, where the elements and the
// checkpoint went.
func TestReadSummaryStopAndCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		s    readSummary
		want []string
	}{
		{readSummary{Job: "j", Batches: 5, Seconds: 1, Stopped: "take", Take: 5, Checkpoint: "ck.bin", CheckpointBytes: 170},
			[]string{"stopped after --take 5 batches", "checkpoint: 170 bytes written to ck.bin"}},
		{readSummary{Job: "j", Batches: 3, Seconds: 1, Stopped: "end", Take: 5, Dump: "out.jsonl", Dumped: 30},
			[]string{"the data ended before --take 5: read 3 batches", "dump: 30 elements written to out.jsonl"}},
		{readSummary{Job: "j", Batches: 7, Seconds: 1, Stopped: "interrupted", ResumedFrom: "ck.bin"},
			[]string{"interrupted: stopped reading after 7 batches", "resumed from checkpoint ck.bin"}},
	} {
		var b strings.Builder
		printReadSummary(&b, tc.s)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("summary without %q:\n%s", w, b.String())
			}
		}
	}
}
