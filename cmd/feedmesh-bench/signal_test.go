package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh/localcluster"
)

// lockedBuffer is a bytes.Buffer the test reads while the child writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSIGTERMStopsClusterBenchmark runs the binary as the issue did
// (`cluster --gossip-nodes 100 --presets fast --runs 1`, which once ran 15
// minutes and ignored SIGTERM), sends SIGTERM while it forms the 99 nodes
// of the gossip measurement, and requires it to exit within 10 s on its
// own: not by the 15 s backstop of cli.Program.StopGrace, whose message
// must not appear.
func TestSIGTERMStopsClusterBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts clusters")
	}
	bin := filepath.Join(t.TempDir(), "feedmesh-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name, glob string // SIGTERM once glob matches a path under TMPDIR
		args       []string
	}{
		// SIGTERM while the 3-node runs go on: once a third node's data
		// dir exists.
		{"3-node runs", "feedmesh-bench-*/run-*/node-02", []string{"cluster", "--presets", "fast", "--runs", "50", "--rtts", "10", "--gossip-nodes", "100"}},
		// SIGTERM while the 99 nodes of the gossip measurement start: once
		// the 21st has its data dir.
		{"gossip formation", "feedmesh-bench-*/gossip-*/node-20", []string{"cluster", "--presets", "fast", "--runs", "1", "--rtts", "10", "--gossip-nodes", "100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			waited := false
			defer func() {
				if !waited {
					cmd.Process.Kill()
					<-exited
				}
			}()
			started := func() bool {
				m, _ := filepath.Glob(filepath.Join(tmp, tc.glob))
				return len(m) > 0
			}
			if !localcluster.Poll(2*time.Minute, started) {
				t.Fatalf("the benchmark did not create %s within 2 min; stderr:\n%s", tc.glob, stderr.String())
			}
			sent := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			const bound = 10 * time.Second
			select {
			case err := <-exited:
				waited = true
				took := time.Since(sent)
				t.Logf("exited %.1f s after SIGTERM: %v", took.Seconds(), err)
				if cmd.ProcessState.ExitCode() == 0 {
					t.Errorf("exit code 0 after SIGTERM mid-run; stderr:\n%s", stderr.String())
				}
				if strings.Contains(stderr.String(), "exiting without cleaning up") {
					t.Errorf("stopped by the StopGrace backstop, not by the benchmark returning; stderr:\n%s", stderr.String())
				}
				if !strings.Contains(stderr.String(), "context canceled") {
					t.Errorf("stderr does not say the run was cancelled:\n%s", stderr.String())
				}
				// Its cleanup ran: the nodes' data dirs are gone.
				if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
					t.Errorf("left %d entries in its temp dir", len(ents))
				}
			case <-time.After(bound):
				t.Fatalf("still running %s after SIGTERM; stderr:\n%s", bound, stderr.String())
			}
		})
	}
}
