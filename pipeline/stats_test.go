package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStatsCountsAndBoundingOp(t *testing.T) {
	spec := rng(200, 50).Map("test_double", nil, 1).Filter("test_even", nil).Cost(200, 0).Batch(16, false).Prefetch(2)
	r, err := RunLocal(context.Background(), spec, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Elements != 200 || r.Batches != 13 {
		t.Fatalf("elements %d batches %d, want 200 and 13", r.Elements, r.Batches)
	}
	if len(r.Ops) != 6 {
		t.Fatalf("%d op entries, want 6 (source + 5)", len(r.Ops))
	}
	want := []struct {
		name    string
		in, out int64
	}{
		{"source:range", 0, 200}, {"map(test_double)", 200, 200}, {"filter(test_even)", 200, 200},
		{"cost", 200, 200}, {"batch", 200, 13}, {"prefetch", 13, 13},
	}
	for i, w := range want {
		o := r.Ops[i]
		if o.Name != w.name || o.ElementsIn != w.in || o.ElementsOut != w.out {
			t.Errorf("ops[%d] = %s in %d out %d, want %s in %d out %d", i, o.Name, o.ElementsIn, o.ElementsOut, w.name, w.in, w.out)
		}
		if o.BusySeconds < 0 || o.WaitSeconds < 0 {
			t.Errorf("ops[%d]: negative times %+v", i, o)
		}
	}
	// 200 elements × 200 µs of CPU = 40 ms in the cost op: it bounds.
	if r.BoundingOp != "cost" {
		t.Fatalf("bounding op %q, want cost; ops %+v", r.BoundingOp, r.Ops)
	}
	if c := r.Ops[3]; c.BusySeconds < 0.04 {
		t.Fatalf("cost busy %.4f s, want >= 0.04", c.BusySeconds)
	}
	// The batch op waits at least as long as the cost op works.
	if r.Ops[4].WaitSeconds < r.Ops[3].BusySeconds {
		t.Fatalf("batch wait %.4f < cost busy %.4f", r.Ops[4].WaitSeconds, r.Ops[3].BusySeconds)
	}
	if r.Ops[4].BytesOut != r.Bytes {
		t.Fatalf("batch bytes_out %d, run bytes %d", r.Ops[4].BytesOut, r.Bytes)
	}

	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "* bounds throughput: cost") || !strings.Contains(table.String(), "200 elements in 13 batches") {
		t.Fatalf("table:\n%s", table.String())
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"elements", "batches", "bytes", "seconds", "ops"} {
		if _, ok := generic[k]; !ok {
			t.Fatalf("json lacks %q: %s", k, b)
		}
	}
	op0 := generic["ops"].([]any)[1].(map[string]any)
	for _, k := range []string{"name", "elements_in", "elements_out", "bytes_out", "busy_seconds", "wait_seconds"} {
		if _, ok := op0[k]; !ok {
			t.Fatalf("op json lacks %q: %v", k, op0)
		}
	}
}

func TestParallelMapStatsAndTake(t *testing.T) {
	r, err := RunLocal(context.Background(), rng(1000, 50).Map("test_jitter", nil, 4), RunOptions{Take: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Elements != 10 || r.Batches != 0 {
		t.Fatalf("take 10: elements %d batches %d", r.Elements, r.Batches)
	}
	if m := r.Ops[1]; m.Parallelism != 4 || m.BusySeconds <= 0 {
		t.Fatalf("parallel map stats %+v", m)
	}
}

func TestStatsOff(t *testing.T) {
	r, err := RunLocal(context.Background(), rng(100, 50).Batch(10, false), RunOptions{DisableStats: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Elements != 100 || r.Batches != 10 || len(r.Ops) != 0 || r.Bounding != -1 {
		t.Fatalf("%+v", r)
	}
}

// An empty file names no op as the bottleneck: the source's time opening
// it bounds nothing.
func TestEmptySourceBoundsNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := RunLocal(context.Background(), NewSpec(FromFiles("lines", path)).Batch(10, false), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Elements != 0 || r.Bounding != -1 || r.BoundingOp != "" {
		t.Fatalf("empty file: elements %d, bounding %d %q; want none", r.Elements, r.Bounding, r.BoundingOp)
	}
}

// Lines with invalid UTF-8 that a lines source skips or repairs are
// counted on the source, whatever the split layout, and run-local shows
// the counts in its table and its JSON. Before on_invalid existed this
// spec was rejected: `source.files: unknown field "on_invalid"`.
func TestInvalidUTF8CountedInStats(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 300; i++ {
		switch i % 10 {
		case 3:
			fmt.Fprintf(&b, "line %d \xff\xfe\n", i)
		case 7:
			fmt.Fprintf(&b, "\x80 line %d\r\n", i)
		default:
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	b.WriteString("last \xe2\x82") // invalid, no newline
	path := filepath.Join(dir, "web.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const bad = 61
	for _, c := range []struct {
		mode              string
		elements          int64
		skipped, replaced int64
		note              string
	}{
		{"skip", 301 - bad, bad, 0, "source:files:lines: 61 bad records skipped\n"},
		{"replace", 301, 0, bad, "source:files:lines: 61 lines with invalid UTF-8 repaired (U+FFFD)\n"},
	} {
		for _, splitBytes := range []int{0, 37, 500} {
			yaml := fmt.Sprintf("source: {files: {paths: [%q], format: lines, on_invalid: %s, split_bytes: %d}}\nops: [{prefetch: {buffer: 4}}]\n", path, c.mode, splitBytes)
			s, err := ParseYAML([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			r, err := RunLocal(context.Background(), s, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			src := r.Ops[0]
			if r.Elements != c.elements || src.Skipped != c.skipped || src.Replaced != c.replaced {
				t.Fatalf("%s split_bytes %d: %d elements, skipped %d, replaced %d; want %d, %d, %d",
					c.mode, splitBytes, r.Elements, src.Skipped, src.Replaced, c.elements, c.skipped, c.replaced)
			}
			var table bytes.Buffer
			if err := r.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(table.String(), c.note) {
				t.Fatalf("table lacks %q:\n%s", c.note, table.String())
			}
			js, _ := json.Marshal(r)
			want := fmt.Sprintf(`"skipped":%d`, c.skipped)
			if c.mode == "replace" {
				want = fmt.Sprintf(`"replaced":%d`, c.replaced)
			}
			if !strings.Contains(string(js), want) {
				t.Fatalf("JSON lacks %s: %s", want, js)
			}
		}
	}
	// The default fails on the first bad line, naming file, line and offset.
	s, _ := ParseYAML([]byte(fmt.Sprintf("source: {files: {paths: [%q], format: lines}}\n", path)))
	if _, err := RunLocal(context.Background(), s, RunOptions{}); err == nil ||
		!strings.Contains(err.Error(), path+":4: invalid UTF-8 at byte 7 of the line (file offset 28)") {
		t.Fatalf("default: %v", err)
	}
}

func TestStatsSum(t *testing.T) {
	a := Stats{Elapsed: time.Second, Ops: []OpStats{
		{Name: "source:range", Index: -1, ElementsOut: 10, BusySeconds: 1, StallSeconds: 1, WaitSeconds: 0.5, Parallelism: 1},
		{Name: "map(cost)", Index: 0, ElementsIn: 10, ElementsOut: 10, BusySeconds: 2, StallSeconds: 0.5, Parallelism: 1, BytesOut: 40},
	}}
	b := Stats{Elapsed: 2 * time.Second, Ops: []OpStats{
		{Name: "source:range", Index: -1, ElementsOut: 30, BusySeconds: 1, StallSeconds: 1, Parallelism: 1, Skipped: 2},
		{Name: "map(cost)", Index: 0, ElementsIn: 30, ElementsOut: 30, BusySeconds: 6, StallSeconds: 3, Parallelism: 4, BytesOut: 120},
	}}
	s, err := a.Sum(b)
	if err != nil {
		t.Fatal(err)
	}
	src, m := s.Ops[0], s.Ops[1]
	if s.Elapsed != 3*time.Second || src.ElementsOut != 40 || src.WaitSeconds != 0.5 || src.Skipped != 2 ||
		m.ElementsIn != 40 || m.BusySeconds != 8 || m.StallSeconds != 3.5 || m.Parallelism != 4 || m.BytesOut != 160 {
		t.Fatalf("sum %+v", s)
	}
	if s.Bounding != 1 {
		t.Errorf("bounding %d, want the map (1): its stall 3.5 s beats the source's 2 s", s.Bounding)
	}
	if a.Ops[1].BusySeconds != 2 {
		t.Error("Sum changed its receiver's ops")
	}
	if e, err := (Stats{}).Sum(a); err != nil || len(e.Ops) != 2 || e.Elapsed != time.Second {
		t.Errorf("empty + a: %+v, %v", e, err)
	}
	if _, err := a.Sum(Stats{Ops: a.Ops[:1]}); err == nil {
		t.Error("stats of 2 and 1 ops added up")
	}
	other := slices.Clone(b.Ops)
	other[1].Name = "map(cast)"
	if _, err := a.Sum(Stats{Ops: other}); err == nil || !strings.Contains(err.Error(), "map(cast)") {
		t.Errorf("stats of another spec: %v", err)
	}
}
