package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/client/offload"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
)

// readProcess runs `feedmesh read args...` (the product binary) with env
// added to its environment, and returns its stdout, its stderr and its
// exit code (-1 when it was still running after timeout, and killed).
func readProcess(t *testing.T, timeout time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, feedmeshBinary(t), append([]string{"read"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return out.String(), errb.String(), -1
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// readOutput is what these tests read of `feedmesh read --json`.
type readOutput struct {
	Elements int64                `json:"elements"`
	Stopped  string               `json:"stopped"`
	Offload  *client.OffloadStats `json:"offload,omitempty"`
}

// seedProfileCache writes to the profiles file path (`read
// --offload-profiles`) an offload profile of the spec at specPath under
// which offload auto cuts the pipeline after its first op (the host
// slow, the link fast, the ops after the cut cheap, the nodes running the
// whole pipeline bounded by the link): what a first run of the pipeline
// naming that file leaves in it when it measured that.
func seedProfileCache(t *testing.T, path, specPath string) {
	t.Helper()
	spec, err := pipeline.LoadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := spec.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	// The first op's elements are small, the second's large (a decode):
	// the link carries 10⁵ of the first a second, 100 of the second.
	ops := make([]offload.OpRate, len(spec.Ops))
	for i := range ops {
		ops[i] = offload.OpRate{Seconds: 1e-6, Parallelism: 1, Bytes: 1e5}
	}
	ops[0].Bytes = 100
	p := client.OffloadProfile{Ingest: 1e4, Local: 10, Remote: 10, RemoteMeasured: true, Rows: 300, Ops: ops, LinkBytesPerSecond: 1e7}
	b, err := json.Marshal(map[string]any{fp + "@" + host: map[string]any{"profile": p, "at": time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadResumeDefaultsProcess (issue 42): three real node processes and
// real `feedmesh read` processes with the default options but for
// --offload-profiles, offload auto finding this host's profile of the
// pipeline in the file it names.
//
//   - auto-cut: `read --take --checkpoint` (auto cuts the job), then
//     `read --resume` within gc_after: the resume adopts the job's cut
//     and reads the rest, the two dumps holding the dataset exactly once.
//     A resume that asks for another cut is refused, naming the flag.
//   - waits: the same `read --take --checkpoint` twice within gc_after,
//     then `read --resume` from the last checkpoint: it warns at once on
//     stderr that the job waits for another consumer's checkpoint, and
//     fails after --resume-wait saying what to do.
func TestReadResumeDefaultsProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 node processes")
	}
	nodes := startNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cl, _ := dialFormed(t, ctx, nodes, 0)
	cl.Close()
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yaml")
	const n = 3000
	if err := os.WriteFile(specPath, []byte("source:\n  range: {stop: 3000, split_size: 100}\nops:\n  - cost: {sleep_us: 20}\n  - cost: {sleep_us: 20}\n  - batch: {size: 20}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	profiles := filepath.Join(dir, "profiles.json")
	seedProfileCache(t, profiles, specPath)
	// No profile in the user cache directory counts any more: the
	// profile is the named file's (--offload-profiles).
	env := []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", nodes[i].port) }
	read := func(node int, job string, extra ...string) (readOutput, string, int) {
		t.Helper()
		args := append([]string{"--addr", addr(node), "--spec", specPath, "--job", job, "--json", "--progress=false", "--offload-profiles", profiles}, extra...)
		out, errOut, code := readProcess(t, 90*time.Second, env, args...)
		var s readOutput
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("read %v: %v: %s", args, err, out)
			}
		}
		return s, errOut, code
	}

	t.Run("auto-cut", func(t *testing.T) {
		ck, part1, part2 := filepath.Join(dir, "ck.bin"), filepath.Join(dir, "part1.jsonl"), filepath.Join(dir, "part2.jsonl")
		// --local-cpus: on a loaded host auto may measure no spare CPU and
		// run remote before it looks for a cut.
		first, errOut, code := read(0, "j", "--take", "40", "--checkpoint", ck, "--dump", part1, "--local-cpus", "1")
		if code != 0 {
			t.Fatalf("first read exited %d: %s", code, errOut)
		}
		if o := first.Offload; o == nil || o.Cut != 1 {
			t.Fatalf("offload auto did not cut the job after op 1 (the test's premise): %+v", o)
		}

		_, errOut, code = read(1, "j", "--resume", ck, "--offload-boundary", "2", "--dump", filepath.Join(dir, "never.jsonl"))
		if code == 0 || !strings.Contains(errOut, "--offload-boundary") || !strings.Contains(errOut, "cut after 1 ops") {
			t.Errorf("a resume asking for another cut: exit %d, %q; want a failure naming --offload-boundary and the job's cut", code, errOut)
		}
		if strings.Contains(errOut, "apply CreateJob") || strings.Contains(errOut, "at index") {
			t.Errorf("the error shows Raft internals: %s", errOut)
		}

		second, errOut, code := read(1, "j", "--resume", ck, "--dump", part2)
		if code != 0 {
			t.Fatalf("resume with the default options exited %d: %s", code, errOut)
		}
		if o := second.Offload; o == nil || o.Cut != 1 || second.Stopped != "end" {
			t.Errorf("resumed read: %+v, offload %+v; want the job's cut adopted and the data read to its end", second, o)
		}
		counts := map[int64]int{}
		for _, v := range append(jobtest.DumpValues(t, part1), jobtest.DumpValues(t, part2)...) {
			counts[v]++
		}
		for v := range int64(n) {
			if counts[v] != 1 {
				t.Fatalf("element %d read %d times", v, counts[v])
			}
		}
		t.Logf("first read %d elements, cut %d (%s); resumed read %d", first.Elements, first.Offload.Cut, first.Offload.Reason, second.Elements)
	})

	t.Run("waits", func(t *testing.T) {
		ck := filepath.Join(dir, "ck2.bin")
		for range 2 {
			if _, errOut, code := read(0, "j2", "--take", "10", "--checkpoint", ck, "--local-cpus", "1"); code != 0 {
				t.Fatalf("read --take --checkpoint exited %d: %s", code, errOut)
			}
		}
		start := time.Now()
		_, errOut, code := readProcess(t, 45*time.Second, env, "--addr", addr(2), "--spec", specPath, "--job", "j2", "--json", "--progress=false", "--resume", ck, "--resume-wait", "3s")
		took := time.Since(start)
		if code == 0 || code == -1 {
			t.Fatalf("resume from the second run's checkpoint alone: exit %d after %v (-1: still blocked, killed); stderr %q", code, took, errOut)
		}
		for _, w := range []string{"WARN", "waits for the checkpoints", "1 of 2", "--resume-wait", "new job name"} {
			if !strings.Contains(errOut, w) {
				t.Errorf("stderr without %q: %s", w, errOut)
			}
		}
		t.Logf("exit %d after %v: %s", code, took, errOut)
	})
}
