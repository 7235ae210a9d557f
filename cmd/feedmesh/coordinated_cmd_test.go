package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/feedmesh/feedmesh/testcluster"
)

func TestReadCoordinatedFlags(t *testing.T) {
	for _, args := range [][]string{
		{"read", "--spec", "x.yaml", "--job", "j", "--coordinated"},
		{"read", "--spec", "x.yaml", "--job", "j", "--coordinated", "--consumers", "2", "--index", "2"},
	} {
		_, errOut, code := runCmd(t, args...)
		if code == 0 || !strings.Contains(errOut, "--coordinated needs --consumers") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
	if _, errOut, code := runCmd(t, "read", "--spec", "x.yaml", "--job", "j", "--compression", "snappy"); code == 0 || !strings.Contains(errOut, "--compression") || !strings.Contains(errOut, "lz4") {
		t.Errorf("--compression snappy: exit %d, %q", code, errOut)
	}
	// --workers: a choice that is not one, or one the job cannot take,
	// fails before anything is dialed or created, saying what it takes.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "many"}, `--workers: workers "many": want auto (the cluster chooses), all (every node) or a count >= 1`},
		{[]string{"--workers", "auto", "--coordinated", "--consumers", "2"}, "workers auto with coordinated on: coordinated reads do not autoscale (every worker has its turn in the round rotation): take workers all or a fixed count"},
		{[]string{"--workers", "auto", "--share"}, "workers auto with share on: a sharing job does not autoscale"},
		{[]string{"--workers", "all", "--max-workers", "2"}, "workers all: contradicts max_workers 2"},
	} {
		args := append([]string{"read", "--addr", "127.0.0.1:1", "--spec", "x.yaml", "--job", "j"}, tc.args...)
		if _, errOut, code := runCmd(t, args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// The readers also ask for zstd: a coordinated job's one-batch streams
// are compressed too.
func TestReadCoordinated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 2)
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte(`
source:
  synthetic: {kind: text, count: 2000, split_size: 100, seed: 1}
ops:
  - map: {fn: tokenize_whitespace, args: {vocab_size: 1000}}
  - bucket_by_sequence_length: {tensor: tokens, boundaries: [16, 32, 64], batch_sizes: [8, 8, 8, 8]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sums := make([]readSummary, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, code := runCmd(t, "read", "--addr", c.Node(i).Addr(), "--spec", spec, "--job", "cj", "--coordinated",
				"--consumers", "2", "--index", []string{"0", "1"}[i], "--pad-final-round", "--compression", "zstd", "--json", "--progress=false")
			if code != 0 {
				t.Errorf("reader %d exited %d: %s", i, code, errOut)
				return
			}
			if err := json.Unmarshal([]byte(out), &sums[i]); err != nil {
				t.Errorf("reader %d: %v: %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	a, b := sums[0].Coordinated, sums[1].Coordinated
	if a == nil || b == nil || a.Rounds == 0 || a.Rounds != b.Rounds || a.Index != 0 || b.Index != 1 {
		t.Fatalf("coordinated summaries %+v, %+v", a, b)
	}
	for i, s := range sums {
		// Unpadded alone takes 0.85–0.93 of the bytes here, zstd ~0.5.
		if s.WireBytes <= 0 || float64(s.WireBytes) > 0.7*float64(s.Bytes) {
			t.Errorf("reader %d: %d bytes on the wire for %d delivered, want zstd's fewer", i, s.WireBytes, s.Bytes)
		}
	}
	if sums[0].Elements+sums[1].Elements != 2000 {
		t.Fatalf("%d + %d elements, want 2000", sums[0].Elements, sums[1].Elements)
	}
}
