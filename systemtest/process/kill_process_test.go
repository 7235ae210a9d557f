package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

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
	metrics int      // --metrics-addr port, 0 if none
	bin     string   // the binary to run; "" for this tree's (feedmeshBinary)
	preset  string   // --preset; "" for fast
	args    []string // of `feedmesh node`
	dir     string   // its working directory ("": the test's)
	cmd     *exec.Cmd
	waitErr chan error
	exited  bool // the process of the last start was waited for (kill, stop)
}

// start starts the node's process (again, after a kill: same data dir,
// ports and arguments).
func (np *nodeProcess) start(t *testing.T) {
	t.Helper()
	bin := np.bin
	if bin == "" {
		bin = feedmeshBinary(t)
	}
	cmd := exec.Command(bin, np.args...)
	cmd.Dir = np.dir
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	np.cmd, np.waitErr, np.exited = cmd, make(chan error, 1), false
	go func() { np.waitErr <- cmd.Wait() }()
}

// stop SIGTERMs the node's process (a graceful shutdown: it drains) and
// waits up to timeout for it to exit.
func (np *nodeProcess) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := np.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-np.waitErr:
		np.exited = true
		if err != nil {
			t.Errorf("%s exited after SIGTERM: %v", np.name, err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s still running %v after SIGTERM", np.name, timeout)
	}
}

// kill SIGKILLs the node's process and waits for it to exit; it does
// nothing if the process was already waited for (killed or stopped).
func (np *nodeProcess) kill() {
	if np.exited {
		return
	}
	np.cmd.Process.Kill()
	<-np.waitErr
	np.exited = true
}

// logLevel is the node processes': info with -v (their stderr is the
// test's then), warn otherwise.
func logLevel() string {
	if testing.Verbose() {
		return "info"
	}
	return "warn"
}

// startNodes starts n real `feedmesh node` processes (fast preset) that
// form one cluster, and kills whatever is left when the test ends.
func startNodes(t *testing.T, n int, configure ...func(*nodeProcess)) []*nodeProcess {
	t.Helper()
	return startNodesWith(t, n, nil, n, configure...)
}

// startNodesWith is startNodes with extra flags per node (extra, if not
// nil), starting only the first started of them (the others' processes
// are started by the test).
func startNodesWith(t *testing.T, n int, extra func(i int, np *nodeProcess, all []*nodeProcess) []string, started int, configure ...func(*nodeProcess)) []*nodeProcess {
	t.Helper()
	dir := t.TempDir()
	nodes := make([]*nodeProcess, n)
	for i := range nodes {
		nodes[i] = &nodeProcess{name: fmt.Sprintf("p%d", i), gossip: freePort(t), port: freePort(t)}
		for _, c := range configure {
			c(nodes[i])
		}
	}
	for i, np := range nodes {
		preset := np.preset
		if preset == "" {
			preset = "fast"
		}
		np.args = []string{"node", "--name", np.name, "--data-dir", filepath.Join(dir, np.name), "--bind", "127.0.0.1",
			"--gossip-port", strconv.Itoa(np.gossip), "--port", strconv.Itoa(np.port), "--bootstrap-expect", strconv.Itoa(n),
			"--preset", preset, "--log-level", logLevel()}
		if i > 0 {
			np.args = append(np.args, "--join", fmt.Sprintf("127.0.0.1:%d", nodes[0].gossip))
		}
		if extra != nil {
			np.args = append(np.args, extra(i, np, nodes)...)
		}
		if i < started {
			np.start(t)
		}
	}
	t.Cleanup(func() {
		for _, np := range nodes {
			if np.cmd != nil {
				np.kill()
			}
		}
	})
	return nodes
}

// dialFormed dials node i once the cluster of len(nodes) processes has
// formed with a leader, and returns the client and the leader's name.
func dialFormed(t *testing.T, ctx context.Context, nodes []*nodeProcess, i int) (*client.Client, string) {
	t.Helper()
	fast := transport.FastConfig()
	opts := client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond}
	if testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("side", "client")
	}
	var cl *client.Client
	deadline := time.Now().Add(60 * time.Second) // node processes start slowly on a loaded machine
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var err error
		if cl == nil {
			dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
			cl, err = client.Dial(dctx, fmt.Sprintf("127.0.0.1:%d", nodes[i].port), opts)
			dcancel()
		}
		if err == nil {
			var ms []api.Member
			ms, err = cl.Members(ctx)
			st, serr := cl.Status(ctx)
			if err == nil && serr == nil && st.Leader != "" && len(ms) == len(nodes) {
				return cl, st.Leader
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster of %d processes did not form: %v", len(nodes), err)
		}
		<-tick.C
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, leader := dialFormed(t, ctx, nodes, 1)
	defer cl.Close()
	const n = 6000
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
	spec.Shuffle(64, 3)
	spec.Cost(0, 300)
	spec.Batch(10, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "eo-process", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	victim := -1 // the leader at the kill, which may also be the node the client dialed
	leaderIndex := func() int {
		if st, err := cl.Status(ctx); err == nil && st.Leader != "" {
			leader = st.Leader // leadership may have moved since the cluster formed
		}
		for i, np := range nodes {
			if np.name == leader {
				return i
			}
		}
		t.Fatalf("leader %q is none of the processes", leader)
		return -1
	}
	counts := make([]int, n)
	killed := false
	readValues(t, ctx, it, counts, 1<<30, func(batches int) {
		if !killed && batches == 60 {
			killed, victim = true, leaderIndex()
			if err := nodes[victim].cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
		}
	})
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

// readValues reads it until io.EOF or max batches, counting each element
// of tensor "value" in counts; each, if not nil, runs after every batch
// with the number read so far. It returns the number of batches read.
func readValues(t *testing.T, ctx context.Context, it *client.Iterator, counts []int, max int, each func(batches int)) int {
	t.Helper()
	got := 0
	for got < max {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", got, err)
		}
		tv, _ := b.Get("value")
		vs, err := tv.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			counts[v]++
		}
		got++
		if each != nil {
			each(got)
		}
	}
	return got
}
