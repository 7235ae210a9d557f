// Package quictest is the tests' QUIC harness: a transport.Transport on
// its own loopback UDP socket, with its codec, optionally an RPC server
// answering "echo", and a socket a test can blackhole; closed at test
// cleanup.
//
// transport's own (internal) tests cannot import it (it imports
// transport); they build their nodes on the same pieces,
// testutil.Loopback and testutil.Blackhole.
package quictest

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/transport"
)

// Node is one transport on its own loopback socket.
type Node struct {
	T     *transport.Transport
	Codec *transport.Codec
	UDP   *net.UDPConn
	// Fault blackholes the node's socket (Fault.On.Store(true)); nil
	// unless started with Options.Faulty.
	Fault *testutil.Blackhole
	// RPC serves "echo" (a string back) on the control streams; nil
	// unless started with Options.Echo.
	RPC   *transport.RPCServer
	serve chan error
}

// Options says how Start makes a node; the zero value is a server with
// transport.FastConfig and development TLS, and no RPC server.
type Options struct {
	Addr       string            // listen address; default 127.0.0.1:0
	Config     *transport.Config // default transport.FastConfig()
	ClientOnly bool              // no server TLS: the node only dials
	// ServerTLS and ClientTLS replace the development TLS (made by
	// transport.DevTLS) when either is set.
	ServerTLS, ClientTLS *tls.Config
	Faulty               bool         // the socket can be blackholed (Node.Fault)
	Echo                 bool         // serve "echo" over RPC (Node.RPC)
	Log                  *slog.Logger // the transport's logger
}

// Start starts a node and registers its Close with tb.Cleanup.
func Start(tb testing.TB, o Options) *Node {
	tb.Helper()
	cfg := transport.FastConfig()
	if o.Config != nil {
		cfg = *o.Config
	}
	if o.ServerTLS == nil && o.ClientTLS == nil {
		var err error
		o.ServerTLS, o.ClientTLS, err = transport.DevTLS(tb.TempDir(), "quictest")
		if err != nil {
			tb.Fatal(err)
		}
	}
	if o.ClientOnly {
		o.ServerTLS = nil
	}
	udp, pc, bh := testutil.Loopback(tb, o.Addr, o.Faulty)
	n := &Node{UDP: udp, Fault: bh}
	var err error
	n.T, err = transport.New(pc, o.ServerTLS, o.ClientTLS, cfg, o.Log)
	if err != nil {
		udp.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(n.Close)
	n.Codec, err = transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		tb.Fatal(err)
	}
	if o.Echo && !o.ClientOnly {
		n.RPC = transport.NewRPCServer(n.Codec, cfg.MaxConcurrentRPCs, nil)
		n.RPC.Handle("echo", func(_ context.Context, decode func(any) error) (any, error) {
			var s string
			if err := decode(&s); err != nil {
				return nil, err
			}
			return s, nil
		})
		n.serve = make(chan error, 1)
		l := n.T.Listener(transport.KindControl)
		go func() { n.serve <- n.RPC.Serve(l) }()
	}
	return n
}

// Addr is the node's address, for peers to dial.
func (n *Node) Addr() string { return n.T.Addr().String() }

// Close stops the RPC server (and waits for it), closes the transport and
// its socket; safe to call twice.
func (n *Node) Close() {
	if n.RPC != nil {
		n.RPC.Close()
		<-n.serve
		n.RPC = nil
	}
	n.T.Close()
	n.UDP.Close()
}

// Echo calls addr's "echo" from n and fails the test unless it answers.
func (n *Node) Echo(tb testing.TB, addr string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var got string
	if err := transport.Call(ctx, n.T, n.Codec, addr, "echo", "ping", &got); err != nil {
		tb.Fatalf("echo to %s: %v", addr, err)
	}
	if got != "ping" {
		tb.Fatalf("echo to %s: got %q", addr, got)
	}
}
