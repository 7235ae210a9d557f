package multihost

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/slowlink"
	"github.com/feedmesh/feedmesh/internal/testutil/dnstest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/transport"
)

const (
	clusterName = "mh"
	joinName    = "feedmesh.mesh.test"
	gossipPort  = 7946
	quicPort    = 7947
	metricsPort = 9947
)

// node is one node process.
type node struct {
	name    string
	addr    string // QUIC host:port
	metrics string // http://host:port
	args    []string
	netns   string // "" on the machine's own namespace
	delay   string // its delay file
	cmd     *exec.Cmd
	waitErr chan error
}

func (n *node) start(t *testing.T, bin string) {
	t.Helper()
	argv := append([]string{bin}, n.args...)
	if n.netns != "" {
		argv = append([]string{"ip", "netns", "exec", n.netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "FEEDMESH_TESTHOOK_DELAY_FILE="+n.delay, "FEEDMESH_QUIET=1")
	cmd.Stdout = io.Discard
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.waitErr = cmd, make(chan error, 1)
	go func() { n.waitErr <- cmd.Wait() }()
}

func (n *node) kill() {
	if n.cmd != nil {
		n.cmd.Process.Kill()
		<-n.waitErr
		n.cmd = nil
	}
}

// setDelay sets the one-way delay of what n receives.
func (n *node) setDelay(t *testing.T, base, jitter time.Duration) {
	t.Helper()
	if err := os.WriteFile(n.delay+".tmp", []byte(fmt.Sprintf("%v %v\n", base, jitter)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(n.delay+".tmp", n.delay); err != nil {
		t.Fatal(err)
	}
}

// secrets makes the cluster's CA, a node certificate per name, a client
// certificate and a gossip key with the binary's own commands, as the
// docs/operating/cluster.md tells an operator to.
type secrets struct{ dir, key string }

func makeSecrets(t *testing.T, bin string, names []string) secrets {
	t.Helper()
	dir := t.TempDir()
	tls := func(args ...string) {
		out, err := exec.Command(bin, append([]string{"tls"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("feedmesh tls %v: %v\n%s", args, err, out)
		}
	}
	tls("ca", "create", "--cluster", clusterName, "--dir", dir)
	for _, n := range names {
		tls("cert", "create", "--node", n, "--dir", dir)
	}
	tls("cert", "create", "--client", "trainer", "--dir", dir)
	var k [32]byte
	crand.Read(k[:])
	key := filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(key, []byte(base64.StdEncoding.EncodeToString(k[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	return secrets{dir: dir, key: key}
}

func (s secrets) nodeFlags(name string) []string {
	p := filepath.Join(s.dir, clusterName)
	return []string{"--gossip-key", s.key, "--tls-ca", p + "-ca.crt", "--tls-cert", p + "-node-" + name + ".crt", "--tls-key", p + "-node-" + name + ".key"}
}

// dial connects the trainer to addr under mutual TLS; its receive side
// is delayed by delay (nil: none).
func (s secrets) dial(t *testing.T, ctx context.Context, addr string, delay slowlink.DelayFunc) (*client.Client, error) {
	t.Helper()
	p := filepath.Join(s.dir, clusterName)
	tc, err := transport.ClientTLS(p+"-ca.crt", p+"-client-trainer.crt", p+"-client-trainer.key")
	if err != nil {
		t.Fatal(err)
	}
	fast := transport.FastConfig()
	opts := client.Options{TLS: tc, Transport: &fast, HeartbeatInterval: 100 * time.Millisecond}
	if testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("side", "client")
	}
	if delay != nil {
		pc, err := net.ListenPacket("udp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		opts.PacketConn = slowlink.NewDelay(pc, delay)
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return client.Dial(dctx, addr, opts)
}

func httpStatus(url string) int {
	hc := http.Client{Timeout: time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFormed waits until the node at addr sees want members alive and a
// leader, and every node's /readyz answers 200; it returns a client of
// that node.
func waitFormed(t *testing.T, ctx context.Context, s secrets, nodes []*node, dialed int, want int, within time.Duration) *client.Client {
	t.Helper()
	deadline := time.Now().Add(within)
	var cl *client.Client
	var last string
	for {
		if cl == nil {
			c, err := s.dial(t, ctx, nodes[dialed].addr, nil)
			if err == nil {
				cl = c
			} else {
				last = err.Error()
			}
		}
		if cl != nil {
			ms, err := cl.Members(ctx)
			st, serr := cl.Status(ctx)
			alive := 0
			for _, m := range ms {
				if m.Status == api.StatusAlive {
					alive++
				}
			}
			last = fmt.Sprintf("%d alive, leader %q, errors %v %v", alive, st.Leader, err, serr)
			if err == nil && serr == nil && alive == want && st.Leader != "" {
				ready := 0
				for _, n := range nodes {
					if n.cmd != nil && httpStatus(n.metrics+"/readyz") == 200 {
						ready++
					}
				}
				if ready == want {
					return cl
				}
				last += fmt.Sprintf(", %d ready", ready)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster of %d within %v: %s", want, within, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// leaderOf is the index of the node named by the dialed node's status.
func leaderOf(t *testing.T, ctx context.Context, cl *client.Client, nodes []*node) int {
	t.Helper()
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if n.name == st.Leader {
			return i
		}
	}
	t.Fatalf("leader %q is none of the nodes", st.Leader)
	return -1
}

// rate reads a DYNAMIC job of cheap batches for warm+measure and returns
// its batches per second over measure.
func rate(t *testing.T, ctx context.Context, cl *client.Client, job string, warm, measure time.Duration) float64 {
	t.Helper()
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 50_000_000, SplitSize: 256}})
	spec.Batch(64, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: job, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	t0 := time.Now()
	n := 0
	var start time.Time
	for {
		if _, err := it.Next(ctx); err != nil {
			t.Fatalf("%s: %v", job, err)
		}
		el := time.Since(t0)
		if el < warm {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		n++
		if el >= warm+measure {
			return float64(n) / time.Since(start).Seconds()
		}
	}
}

// TestMultiHost (issue 43, item 7): five node processes on five hosts
// (network namespaces on a bridge, each with its IP, egress shaped by tc
// tbf to 1 Gbit/s), started in a random order and joining by one DNS name
// whose records appear as they start (a headless Service), under mutual
// TLS and a gossip key. It measures formation, then batches/s of a cheap
// DYNAMIC job with 0 and 2 ms of delay per link against the same five
// processes on loopback; then, with 1 to 5 ms of delay with jitter per
// link: a coordinated job of 4 ranks reads every sentence once, and a
// DYNAMIC exactly-once job reads every element once while the Raft
// leader's host is cut off (link down) for 3 s and healed: it measures the
// failover pause and the time to heal.
func TestMultiHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 10 node processes in network namespaces (1 min)")
	}
	needRoot(t)
	const n = 5
	bin := feedmeshBinary(t)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	sec := makeSecrets(t, bin, names)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := t.TempDir()

	// Loopback first: the same processes, flags and certificates on the
	// machine's own loopback, for the throughput ratio.
	var loopRate float64
	{
		lo := make([]*node, n)
		ports := make([]int, 3*n)
		for i := range ports {
			ports[i] = freePort(t)
		}
		var joins []string
		for i := range lo {
			joins = append(joins, fmt.Sprintf("127.0.0.1:%d", ports[3*i]))
		}
		for i := range lo {
			lo[i] = &node{name: names[i], addr: fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]), metrics: fmt.Sprintf("http://127.0.0.1:%d", ports[3*i+2]),
				delay: filepath.Join(work, "lo-delay-"+names[i])}
			lo[i].args = append([]string{"node", "--name", names[i], "--data-dir", filepath.Join(work, "lo-"+names[i]), "--bind", "127.0.0.1",
				"--gossip-port", strconv.Itoa(ports[3*i]), "--port", strconv.Itoa(ports[3*i+1]), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]),
				"--join", strings.Join(joins, ","), "--bootstrap-expect", "3", "--preset", "fast", "--log-level", logLevel()}, sec.nodeFlags(names[i])...)
			lo[i].start(t, bin)
		}
		cl := waitFormed(t, ctx, sec, lo, 0, n, 60*time.Second)
		loopRate = rate(t, ctx, cl, "rate-loopback", time.Second, 4*time.Second)
		cl.Close()
		for _, nd := range lo {
			nd.kill()
		}
		t.Logf("loopback: %.0f batches/s", loopRate)
	}

	h := makeHosts(t, n, "1gbit")
	dns, err := dnstest.Start(net.JoinHostPort(h.gw, "53"))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = &node{name: names[i], addr: net.JoinHostPort(h.ip[i], strconv.Itoa(quicPort)), metrics: "http://" + net.JoinHostPort(h.ip[i], strconv.Itoa(metricsPort)),
			netns: h.ns[i], delay: filepath.Join(work, "delay-"+names[i])}
		nodes[i].args = append([]string{"node", "--name", names[i], "--data-dir", filepath.Join(work, names[i]), "--bind", h.ip[i],
			"--gossip-port", strconv.Itoa(gossipPort), "--port", strconv.Itoa(quicPort), "--metrics-addr", net.JoinHostPort(h.ip[i], strconv.Itoa(metricsPort)),
			"--join", joinName, "--bootstrap-expect", "3", "--preset", "fast", "--log-level", logLevel()}, sec.nodeFlags(names[i])...)
		nodes[i].setDelay(t, 0, 0)
	}
	defer func() {
		for _, nd := range nodes {
			nd.kill()
		}
	}()

	// Formation, in a random order; each DNS record appears as its node
	// starts (the first one's a little after).
	order := rand.Perm(n)
	t0 := time.Now()
	for k, i := range order {
		if k > 0 {
			dns.Add(joinName, h.ipOf(i))
		}
		nodes[i].start(t, bin)
		if k == 0 {
			time.Sleep(200 * time.Millisecond)
			dns.Add(joinName, h.ipOf(i))
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
	}
	cl := waitFormed(t, ctx, sec, nodes, order[0], n, 60*time.Second)
	formation := time.Since(t0)
	cl.Close()

	t.Logf("formed: 5 alive, a leader, every /readyz 200, %v after the first start (order %v, %d DNS queries for %s)", formation.Round(time.Millisecond), order, dns.Queries(joinName), joinName)

	// Throughput with 0 and 2 ms per link (the trainer's link too).
	var clientBase atomic.Int64
	clientDelay := func() (time.Duration, time.Duration) { return time.Duration(clientBase.Load()), 0 }
	measure := func(d time.Duration, job string) float64 {
		for _, nd := range nodes {
			nd.setDelay(t, d, 0)
		}
		clientBase.Store(int64(d))
		time.Sleep(300 * time.Millisecond) // the nodes read the delay file every 100 ms
		c, err := sec.dial(t, ctx, nodes[0].addr, clientDelay)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return rate(t, ctx, c, job, time.Second, 4*time.Second)
	}
	r0 := measure(0, "rate-0ms")
	r2 := measure(2*time.Millisecond, "rate-2ms")
	t.Logf("batches/s of 64 elements: loopback %.0f; 5 hosts, 0 ms per link %.0f (%.2fx loopback), 2 ms per link %.0f (%.2fx)", loopRate, r0, r0/loopRate, r2, r2/loopRate)

	// 1 to 5 ms per link, with jitter.
	for i, nd := range nodes {
		nd.setDelay(t, time.Duration(i+1)*time.Millisecond, time.Duration(i+1)*time.Millisecond/4)
	}
	clientBase.Store(int64(2 * time.Millisecond))
	time.Sleep(300 * time.Millisecond)

	// A coordinated job, 4 ranks: every sentence once over the ranks,
	// every rank the same rounds.
	{
		c, err := sec.dial(t, ctx, nodes[0].addr, clientDelay)
		if err != nil {
			t.Fatal(err)
		}
		const count, m = 2000, 4
		spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: count, Seed: 5, SplitSize: 50, MaxWords: 256}))
		spec.Map("tokenize_whitespace", fn.Args{"vocab_size": 1000}, 1)
		spec.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{16, 32, 64, 128}, BatchSizes: []int64{16, 8, 4, 2, 1}})
		ids := make([]map[int64]int, m)
		rounds := make([]int, m)
		errs := make([]error, m)
		var wg sync.WaitGroup
		tc := time.Now()
		for r := range m {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[r] = map[int64]int{}
				it, err := c.Distribute(ctx, spec, client.JobOptions{Name: "coordinated", Coordinated: true, NumConsumers: m, ConsumerIndex: r})
				if err != nil {
					errs[r] = err
					return
				}
				defer it.Close()
				for {
					b, err := it.Next(ctx)
					if errors.Is(err, io.EOF) {
						return
					}
					if err != nil {
						errs[r] = err
						return
					}
					rounds[r]++
					if tv, ok := b.Get("id"); ok {
						vs, _ := tv.Int64s()
						for _, v := range vs {
							ids[r][v]++
						}
					}
				}
			}()
		}
		wg.Wait()
		c.Close()
		total := map[int64]int{}
		for r := range m {
			if errs[r] != nil {
				t.Fatalf("coordinated rank %d: %v", r, errs[r])
			}
			if rounds[r] != rounds[0] {
				t.Fatalf("coordinated: rank %d read %d rounds, rank 0 %d", r, rounds[r], rounds[0])
			}
			for v, k := range ids[r] {
				total[v] += k
			}
		}
		for v := range int64(count) {
			if total[v] != 1 {
				t.Fatalf("coordinated: sentence %d read %d times", v, total[v])
			}
		}
		t.Logf("coordinated job, 4 ranks, 1-5 ms per link: %d sentences once, %d rounds per rank, in %v", count, rounds[0], time.Since(tc).Round(time.Millisecond))
	}

	// A DYNAMIC exactly-once job; the leader's host is cut off mid-job.
	watch, err := sec.dial(t, ctx, nodes[order[0]].addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	victim := leaderOf(t, ctx, watch, nodes)
	dialed := (victim + 1) % n
	if order[0] == victim {
		watch.Close()
		if watch, err = sec.dial(t, ctx, nodes[dialed].addr, nil); err != nil {
			t.Fatal(err)
		}
	}
	c, err := sec.dial(t, ctx, nodes[dialed].addr, clientDelay)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const total = 40000
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: total, SplitSize: 50}})
	spec.Cost(0, 100)
	spec.Batch(25, false)
	it, err := c.Distribute(ctx, spec, client.JobOptions{Name: "cut", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	counts := make([]int, total)
	var (
		batches   int
		cutAt     time.Time
		healAt    time.Time
		maxGap    time.Duration
		lastBatch time.Time
		failover  = make(chan time.Duration, 1)
		healed    = make(chan [2]time.Duration, 1)
	)
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", batches, err)
		}
		now := time.Now()
		if !cutAt.IsZero() && !lastBatch.IsZero() && now.Sub(lastBatch) > maxGap && (healAt.IsZero() || now.Before(healAt.Add(5*time.Second))) {
			maxGap = now.Sub(lastBatch)
		}
		lastBatch = now
		tv, _ := b.Get("value")
		vs, err := tv.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			counts[v]++
		}
		batches++
		if batches == 200 {
			cutAt = time.Now()
			h.cut(t, victim)
			go func() { // the failover pause: until a surviving node names a new leader
				for time.Since(cutAt) < time.Minute {
					if st, err := watch.Status(ctx); err == nil && st.Leader != "" && st.Leader != nodes[victim].name {
						failover <- time.Since(cutAt)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				failover <- -1
			}()
			time.AfterFunc(3*time.Second, func() {
				healAt = time.Now()
				exec.Command("ip", "link", "set", h.veth[victim], "up").Run()
				var alive time.Duration
				for time.Since(healAt) < time.Minute {
					ms, err := watch.Members(ctx)
					ok := false
					for _, m := range ms {
						ok = ok || (err == nil && m.Name == nodes[victim].name && m.Status == api.StatusAlive)
					}
					if ok && alive == 0 {
						alive = time.Since(healAt)
					}
					if alive > 0 && httpStatus(nodes[victim].metrics+"/readyz") == 200 {
						healed <- [2]time.Duration{alive, time.Since(healAt)}
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				healed <- [2]time.Duration{-1, -1}
			})
		}
	}
	if cutAt.IsZero() {
		t.Fatal("the job ended before the cut")
	}
	for v, k := range counts {
		if k != 1 {
			t.Fatalf("element %d read %d times, want once (host %s cut off after 200 batches)", v, k, nodes[victim].name)
		}
	}
	fo := <-failover
	hl := <-healed
	if fo < 0 {
		t.Error("no new leader within a minute of the cut")
	}
	if hl[0] < 0 {
		t.Errorf("%s not alive and ready within a minute of the heal", nodes[victim].name)
	}
	st := it.Stats()
	t.Logf("DYNAMIC exactly-once, 1-5 ms per link with jitter: %d elements once in %d batches; leader %s's host cut off for 3 s after 200 batches: new leader elected %v after the cut, longest pause between batches %v; healed: alive again at the leader %v after the link came up, ready %v; exactly-once counters %+v",
		total, batches, nodes[victim].name, fo.Round(time.Millisecond), maxGap.Round(time.Millisecond), hl[0].Round(time.Millisecond), hl[1].Round(time.Millisecond), st.Exact)
}

func logLevel() string {
	if testing.Verbose() {
		return "warn"
	}
	return "error"
}

// freePort returns a port free for both TCP and UDP on loopback.
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
