package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// helperNodeEnv makes this test binary run `feedmesh node` with the
// arguments after "--" (TestHelperNodeProcess), so a test can start real
// node processes and SIGKILL them.
const helperNodeEnv = "FEEDMESH_TEST_NODE_PROCESS"

func TestHelperNodeProcess(t *testing.T) {
	if os.Getenv(helperNodeEnv) != "1" {
		t.Skip("runs as a node process for the process tests")
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

// freePort returns a port free for both TCP and UDP on loopback (gossip
// uses both; QUIC, UDP).
func freePort(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

type nodeProcess struct {
	name    string
	gossip  int
	port    int
	cmd     *exec.Cmd
	waitErr chan error
}

// startNodes starts n real `feedmesh node` processes (fast preset) that
// form one cluster, and kills whatever is left when the test ends.
func startNodes(t *testing.T, n int) []*nodeProcess {
	t.Helper()
	dir := t.TempDir()
	nodes := make([]*nodeProcess, n)
	for i := range nodes {
		nodes[i] = &nodeProcess{name: fmt.Sprintf("p%d", i), gossip: freePort(t), port: freePort(t)}
	}
	for i, np := range nodes {
		args := []string{"node", "--name", np.name, "--data-dir", filepath.Join(dir, np.name), "--bind", "127.0.0.1",
			"--gossip-port", strconv.Itoa(np.gossip), "--port", strconv.Itoa(np.port), "--bootstrap-expect", strconv.Itoa(n),
			"--preset", "fast", "--log-level", "warn"}
		if i > 0 {
			args = append(args, "--join", fmt.Sprintf("127.0.0.1:%d", nodes[0].gossip))
		}
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperNodeProcess$", "--"}, args...)...)
		cmd.Env = append(os.Environ(), helperNodeEnv+"=1")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if testing.Verbose() {
			cmd.Stderr = os.Stderr
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		np.cmd, np.waitErr = cmd, make(chan error, 1)
		go func() { np.waitErr <- cmd.Wait() }()
	}
	t.Cleanup(func() {
		for _, np := range nodes {
			np.cmd.Process.Kill()
			<-np.waitErr
		}
	})
	return nodes
}

// TestExactlyOnceProcessKilled: three real node processes; a DYNAMIC job
// (exactly-once, the default) is read while the Raft leader's process,
// also a worker (and perhaps the node the client dialed), is SIGKILLed:
// every element arrives exactly once.
func TestExactlyOnceProcessKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 node processes")
	}
	nodes := startNodes(t, 3)
	fast := transport.FastConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var cl *client.Client
	var leader string
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var err error
		if cl == nil {
			dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
			cl, err = client.Dial(dctx, fmt.Sprintf("127.0.0.1:%d", nodes[1].port), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond})
			dcancel()
		}
		if err == nil {
			var ms []api.Member
			ms, err = cl.Members(ctx)
			st, serr := cl.Status(ctx)
			if err == nil && serr == nil && st.Leader != "" && len(ms) == 3 {
				leader = st.Leader
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster of 3 processes did not form: %v", err)
		}
		<-tick.C
	}
	defer cl.Close()
	const n = 6000
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
	spec.Shuffle(64, 3)
	spec.Cost(0, 300)
	spec.Batch(10, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "eo-process", Sharding: client.Dynamic})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	victim := -1 // the leader, which may also be the node the client dialed
	for i, np := range nodes {
		if np.name == leader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("leader %q is none of the processes", leader)
	}
	counts := make([]int, n)
	killed := false
	for batches := 0; ; batches++ {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", batches, err)
		}
		tv, _ := b.Get("value")
		vs, err := tv.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			counts[v]++
		}
		if !killed && batches == 60 {
			killed = true
			if err := nodes[victim].cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
		}
	}
	if !killed {
		t.Fatal("the job ended before the kill")
	}
	for v, k := range counts {
		if k != 1 {
			t.Fatalf("element %d delivered %d times", v, k)
		}
	}
	st := it.Stats()
	t.Logf("SIGKILLed the leader %s (dialed: %v): all %d elements exactly once; exactly-once counters %+v", nodes[victim].name, victim == 1, n, st.Exact)
}
