package mesh_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// countingHandler counts the records the nodes log, by level, and keeps a
// few WARN/ERROR lines to show when a test fails. Handlers derived with
// WithAttrs/WithGroup share the counts.
type countingHandler struct {
	c     *logCounts
	attrs []slog.Attr
}

type logCounts struct {
	mu         sync.Mutex
	byLevel    map[slog.Level]int
	warnByComp map[string]int // WARN and ERROR lines by component
	samples    []string
	summaries  int // records carrying a "suppressed" count
	suppressed int // the sum of those counts
}

func newCountingLogger() (*slog.Logger, *logCounts) {
	c := &logCounts{byLevel: map[slog.Level]int{}, warnByComp: map[string]int{}}
	return slog.New(&countingHandler{c: c}), c
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", r.Level, r.Message)
	suppressed, component := -1, ""
	each := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		switch a.Key {
		case "suppressed":
			suppressed = int(a.Value.Int64())
		case "component":
			component = a.Value.String()
		}
		return true
	}
	for _, a := range h.attrs {
		each(a)
	}
	r.Attrs(each)
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	h.c.byLevel[r.Level]++
	if suppressed >= 0 {
		h.c.summaries++
		h.c.suppressed += suppressed
	}
	if r.Level >= slog.LevelWarn {
		h.c.warnByComp[component]++
		if len(h.c.samples) < 100 {
			h.c.samples = append(h.c.samples, b.String())
		}
	}
	return nil
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{c: h.c, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *countingHandler) WithGroup(string) slog.Handler { return h }

func (c *logCounts) warnsOf(component string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warnByComp[component]
}

func (c *logCounts) count(lv slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byLevel[lv]
}

// warnOrWorse is the number of WARN and ERROR lines.
func (c *logCounts) warnOrWorse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for lv, n := range c.byLevel {
		if lv >= slog.LevelWarn {
			k += n
		}
	}
	return k
}

func (c *logCounts) report(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("lines by level: %v; WARN/ERROR by component: %v; %d summary lines counting %d lines left out",
		c.byLevel, c.warnByComp, c.summaries, c.suppressed)
	for _, s := range c.samples {
		t.Log(s)
	}
}

// Item 9 of the hardening review: random datagrams to the gossip port and
// streams of an unknown kind to the QUIC port each wrote a WARN or ERROR
// line, thousands in all. The node rate-limits them per cause and says how
// many it left out.
func TestFloodsDoNotFloodTheLog(t *testing.T) {
	logger, counts := newCountingLogger()
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.Logger = logger }))
	n := c.Node(0)
	before := counts.warnOrWorse()

	// 5,000 random datagrams to the gossip port, then a ping: its ack says
	// memberlist has read every datagram sent before it (some it hands to
	// another goroutine, which logs them later).
	const datagrams = 5000
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	gossip, err := net.ResolveUDPAddr("udp", n.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	for i := range datagrams {
		p := buf[:1+i%len(buf)]
		rand.Read(p)
		if _, err := udp.WriteToUDP(p, gossip); err != nil {
			t.Fatal(err)
		}
	}
	pingGossip(t, udp, gossip)

	// 500 streams of an unknown kind to the QUIC port; each one's reset says
	// the node has dealt with it.
	const streams = 500
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	tr, err := transport.New(pc, nil, mustClientTLS(t), transport.FastConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < streams; i += 8 {
				s, err := tr.Dial(ctx, n.Addr(), 0x7f)
				if err != nil {
					t.Errorf("dial stream %d: %v", i, err)
					return
				}
				_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, rerr := s.Read(make([]byte, 1))
				s.Close()
				if rerr == nil {
					t.Errorf("stream %d of an unknown kind was not reset", i)
				}
			}
		})
	}
	wg.Wait()

	c.Stop(0) // writes the last summaries
	gossipLines, streamLines := counts.warnsOf("memberlist"), counts.warnsOf("transport")
	total := counts.warnOrWorse() - before
	t.Logf("%d random datagrams to the gossip port: %d WARN/ERROR lines; %d streams of an unknown kind: %d; %d in all",
		datagrams, gossipLines, streams, streamLines, total)
	// Random datagrams reach some 15-20 of memberlist's messages, each worth
	// a burst of lines and a summary however many datagrams there are (5,000
	// made 2,600-4,000 lines before the limit, 56-62 with it).
	if gossipLines > 100 || streamLines > 10 || total > 120 {
		counts.report(t)
		t.Fatalf("WARN/ERROR lines: %d from memberlist (want ≤ 100), %d from the transport (want ≤ 10), %d in all (want ≤ 120)",
			gossipLines, streamLines, total)
	}
	counts.mu.Lock()
	summaries, suppressed := counts.summaries, counts.suppressed
	counts.mu.Unlock()
	if summaries == 0 || suppressed < streams/2 {
		counts.report(t)
		t.Fatalf("%d summary lines count %d lines left out; want some, counting at least %d", summaries, suppressed, streams/2)
	}
}

// pingGossip sends memberlist pings from conn to the gossip address until
// one is acknowledged. memberlist reads its UDP socket in order, so the ack
// follows every datagram conn sent before.
func pingGossip(t *testing.T, conn *net.UDPConn, to *net.UDPAddr) {
	t.Helper()
	// A ping message (type 0) with msgpack body {"SeqNo": 1, "Node": ""}:
	// an empty node name is accepted by any node.
	ping := []byte{0x00, 0x82, 0xa5, 'S', 'e', 'q', 'N', 'o', 0x01, 0xa4, 'N', 'o', 'd', 'e', 0xa0}
	deadline := time.Now().Add(10 * time.Second)
	resp := make([]byte, 1500)
	for time.Now().Before(deadline) {
		if _, err := conn.WriteToUDP(ping, to); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, from, err := conn.ReadFromUDP(resp); err == nil && from.Port == to.Port {
			return
		}
	}
	t.Fatal("the gossip port did not answer a ping after the datagrams")
}

// A graceful Close of every node of a 3-node cluster logs no ERROR:
// connections torn down under memberlist and Raft while they stop are
// expected then.
func TestGracefulCloseLogsNoError(t *testing.T) {
	logger, counts := newCountingLogger()
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.Logger = logger }))
	put(t, c.Node(0), "k", "v")
	// Counted from here: a slow start (the race detector) may log errors
	// of its own, memberlist's probes timing out.
	before := counts.count(slog.LevelError)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if err := c.Stop(i); err != nil {
				t.Errorf("close node %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if e := counts.count(slog.LevelError) - before; e != 0 {
		counts.report(t)
		t.Fatalf("a graceful close logged %d ERROR lines, want 0", e)
	}
}

// A peer's graceful restart is an expected departure: the nodes that stay
// log no ERROR for it, while it is away (the leader cannot replicate to
// it) or when it is back (issue 42: 721 of 3,140 lines were ERROR).
func TestPeerRestartLogsNoError(t *testing.T) {
	logger, counts := newCountingLogger()
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		if i != 2 {
			cfg.Logger = logger // the restarted node's own lines are not counted
		}
	}))
	c.WaitFor(t, 20*time.Second, "three voters", func() bool {
		_, l := c.Leader()
		return l != nil && len(l.Status().Voters) == 3
	})
	put(t, c.Node(0), "k", "v")
	before := counts.count(slog.LevelError)
	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	// While it is away the leader keeps trying to replicate to it.
	put(t, c.Node(0), "k2", "v2")
	if err := c.Restart(2); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 30*time.Second, "the restarted node back and caught up", func() bool {
		n := c.Node(2)
		return n != nil && n.Status().Leader != "" && n.Status().AppliedIndex >= c.Node(0).Status().CommitIndex
	})
	put(t, c.Node(0), "k3", "v3")
	if e := counts.count(slog.LevelError) - before; e != 0 {
		counts.report(t)
		t.Fatalf("a peer's graceful restart logged %d ERROR lines on the nodes that stayed, want 0", e)
	}
}
