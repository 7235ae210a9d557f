package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// node is one transport with its socket, TLS and an RPC server with an "echo"
// method, closed at test cleanup: internal/testutil/quictest's Node, which
// this package's internal tests cannot import (it imports transport),
// built on the same socket (testutil.Loopback, testutil.Blackhole).
type node struct {
	t     *Transport
	udp   *net.UDPConn
	fc    *testutil.Blackhole // nil unless started faulty
	codec *Codec
	rpc   *RPCServer
	serve chan error
}

type nodeOpts struct {
	addr      string // listen address, default 127.0.0.1:0
	cfg       *Config
	faulty    bool
	serverTLS *tls.Config // default: dev TLS
	clientTLS *tls.Config
	noServer  bool // client-only transport
	noRPC     bool
	log       *slog.Logger
}

// recordHandler counts log records by message, for tests that assert a path
// was taken.
type recordHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.msgs == nil {
		h.msgs = make(map[string]int)
	}
	h.msgs[r.Message]++
	return nil
}

func (h *recordHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[msg]
}

func startNode(tb testing.TB, o nodeOpts) *node {
	tb.Helper()
	cfg := FastConfig()
	if o.cfg != nil {
		cfg = *o.cfg
	}
	if o.serverTLS == nil && o.clientTLS == nil {
		var err error
		o.serverTLS, o.clientTLS, err = DevTLS(tb.TempDir(), "test-node")
		if err != nil {
			tb.Fatal(err)
		}
	}
	if o.noServer {
		o.serverTLS = nil
	}
	udp, pc, fc := testutil.Loopback(tb, o.addr, o.faulty)
	n := &node{udp: udp, fc: fc}
	var err error
	n.t, err = New(pc, o.serverTLS, o.clientTLS, cfg, o.log)
	if err != nil {
		udp.Close()
		tb.Fatal(err)
	}
	n.codec, err = NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		tb.Fatal(err)
	}
	if !o.noRPC && !o.noServer {
		n.rpc = NewRPCServer(n.codec, cfg.MaxConcurrentRPCs, nil)
		n.rpc.Handle("echo", func(_ context.Context, decode func(any) error) (any, error) {
			var s string
			if err := decode(&s); err != nil {
				return nil, err
			}
			return s, nil
		})
		n.serve = make(chan error, 1)
		l := n.t.Listener(KindControl)
		go func() { n.serve <- n.rpc.Serve(l) }()
	}
	tb.Cleanup(n.stop)
	return n
}

// stop closes the node; safe to call twice.
func (n *node) stop() {
	if n.rpc != nil {
		n.rpc.Close()
		<-n.serve
		n.rpc = nil
	}
	n.t.Close()
	n.udp.Close()
}

func (n *node) addr() string { return n.t.Addr().String() }

// echo calls the echo method of addr from n and checks the answer.
func (n *node) echo(tb testing.TB, addr string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var got string
	if err := Call(ctx, n.t, n.codec, addr, "echo", "ping", &got); err != nil {
		tb.Fatalf("echo to %s: %v", addr, err)
	}
	if got != "ping" {
		tb.Fatalf("echo to %s: got %q", addr, got)
	}
}
