package mesh_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/testutil/dnstest"
	"github.com/feedmesh/feedmesh/mesh"
)

// freeGossipPort is a port free for TCP and UDP on every one of ips.
func freeGossipPort(t *testing.T, ips []string) int {
	t.Helper()
next:
	for range 50 {
		l, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		for _, ip := range ips {
			a := net.JoinHostPort(ip, strconv.Itoa(port))
			tl, err := net.Listen("tcp", a)
			if err != nil {
				continue next
			}
			u, err := net.ListenPacket("udp", a)
			tl.Close()
			if err != nil {
				continue next
			}
			u.Close()
		}
		return port
	}
	t.Fatal("no port free on all addresses")
	return 0
}

// TestJoinByDNSName (issue 43, item 3): five nodes, each on its own
// loopback address with the same gossip port (as pods behind a
// Kubernetes headless Service), all given one --join name, start in a
// random order while the name's DNS records follow them (a record appears
// as its node starts, the first one only after its node has tried once:
// NXDOMAIN, then only itself). Every node resolves the name again while
// it retries, and they form one cluster of five with a leader, each
// ready. Before, the name went to memberlist's own lookup (DNS over TCP to
// /etc/resolv.conf's first server; no way to give a resolver), and a node
// whose name resolved to only itself counted that as joined and stopped
// trying.
func TestJoinByDNSName(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 5 nodes")
	}
	const n, name = 5, "feedmesh-headless.feedmesh.svc.cluster.local"
	dns, err := dnstest.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.0.%d", 41+i)
	}
	port := freeGossipPort(t, ips)
	dir := t.TempDir()
	order := rand.Perm(n)
	nodes := make([]*mesh.Node, n)
	defer func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Kill()
			}
		}
	}()
	t0 := time.Now()
	for k, i := range order {
		cfg := mesh.FastConfig()
		cfg.Name = fmt.Sprintf("dns%d", i)
		cfg.DataDir = fmt.Sprintf("%s/%d", dir, i)
		cfg.BindAddr, cfg.GossipPort = ips[i], port
		cfg.Join = []string{net.JoinHostPort(name, strconv.Itoa(port))}
		cfg.BootstrapExpect = 3
		cfg.Resolver = dns.Resolver()
		if lv := os.Getenv("FEEDMESH_TEST_LOGS"); lv != "" {
			var level slog.Level
			level.UnmarshalText([]byte(lv))
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		}
		if k > 0 {
			dns.Add(name, net.ParseIP(ips[i]))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		nd, err := mesh.Start(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("start %s: %v", cfg.Name, err)
		}
		nodes[i] = nd
		if k == 0 {
			time.Sleep(300 * time.Millisecond) // its first tries find no record
			dns.Add(name, net.ParseIP(ips[i]))
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
	}
	formed := func() bool {
		for _, nd := range nodes {
			alive := 0
			for _, m := range nd.Members() {
				if m.Status == api.StatusAlive {
					alive++
				}
			}
			if alive != n || !nd.Readiness().Ready {
				return false
			}
		}
		return true
	}
	for !formed() {
		if time.Since(t0) > 30*time.Second {
			for _, nd := range nodes {
				var view []string
				for _, m := range nd.Members() {
					view = append(view, m.Name+":"+m.Status)
				}
				t.Logf("%s: leader %q, members %v", nd.Name(), nd.Status().Leader, view)
			}
			t.Fatalf("no cluster of %d after 30 s (start order %v)", n, order)
		}
		time.Sleep(50 * time.Millisecond)
	}
	q := dns.Queries(name)
	if q <= n {
		t.Errorf("%d queries for %s by %d nodes: the name was not resolved again while retrying", q, name, n)
	}
	t.Logf("start order %v: one cluster of %d with a leader %v after the first start; %d DNS queries for %s", order, n, time.Since(t0).Round(time.Millisecond), q, name)
}
