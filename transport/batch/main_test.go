package batch

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// blackholeConn drops every datagram in both directions once enabled, as if
// the host had died without closing anything.
type blackholeConn struct {
	net.PacketConn
	on atomic.Bool
}

func (b *blackholeConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if b.on.Load() {
		return len(p), nil
	}
	return b.PacketConn.WriteTo(p, addr)
}

func (b *blackholeConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, addr, err := b.PacketConn.ReadFrom(p)
		if err != nil || !b.on.Load() {
			return n, addr, err
		}
	}
}

// node is a transport on its own loopback socket.
type node struct {
	t     *transport.Transport
	udp   *net.UDPConn
	bh    *blackholeConn // nil unless started faulty
	codec *transport.Codec
}

func (n *node) addr() string { return n.t.Addr().String() }

// close closes the transport and its socket; safe to call twice.
func (n *node) close() {
	n.t.Close()
	n.udp.Close()
}

// startNode starts a transport; server=false gives a dial-only client. A
// faulty node's socket can be blackholed (n.bh); others use the bare UDP
// socket so quic-go keeps its fast paths (GSO, socket buffers).
func startNode(tb testing.TB, cfg transport.Config, server, faulty bool) *node {
	tb.Helper()
	srvTLS, cliTLS, err := transport.DevTLS(tb.TempDir(), "batch-test")
	if err != nil {
		tb.Fatal(err)
	}
	if !server {
		srvTLS = nil
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	n := &node{udp: udp}
	var pc net.PacketConn = udp
	if faulty {
		n.bh = &blackholeConn{PacketConn: udp}
		pc = n.bh
	}
	n.t, err = transport.New(pc, srvTLS, cliTLS, cfg, nil)
	if err != nil {
		udp.Close()
		tb.Fatal(err)
	}
	n.codec, err = transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(n.close)
	return n
}

// pair is a worker node and a client node.
type pair struct {
	worker, client *node
}

func newPair(tb testing.TB, cfg transport.Config) *pair {
	return &pair{worker: startNode(tb, cfg, true, false), client: startNode(tb, cfg, false, false)}
}

// newFaultyPair is newPair with a worker whose socket can be blackholed.
func newFaultyPair(tb testing.TB, cfg transport.Config) *pair {
	return &pair{worker: startNode(tb, cfg, true, true), client: startNode(tb, cfg, false, false)}
}

// stream opens a batch stream from the client to the worker and accepts it.
func (p *pair) stream(tb testing.TB, req OpenRequest, maxWindow int, lim Limits) (*Sender, *Receiver) {
	tb.Helper()
	return p.streamWith(tb, req, maxWindow, ReceiverConfig{Limits: lim}, nil)
}

// streamWith is stream with a ReceiverConfig, and wrap (if not nil)
// applied to the worker's end of the stream before Accept.
func (p *pair) streamWith(tb testing.TB, req OpenRequest, maxWindow int, cfg ReceiverConfig, wrap func(net.Conn) net.Conn) (*Sender, *Receiver) {
	tb.Helper()
	ctx := ctxT(tb, 5*time.Second)
	rcv, err := OpenConfig(ctx, p.client.t, p.client.codec, p.worker.addr(), req, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rcv.Close() })
	c, err := p.worker.t.Listener(transport.KindData).Accept()
	if err != nil {
		tb.Fatal(err)
	}
	if wrap != nil {
		c = wrap(c)
	}
	snd, got, err := Accept(ctx, p.worker.codec, c, maxWindow)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { snd.Close() })
	if got.Job != req.Job || got.Consumer != req.Consumer || got.Window != req.Window || !bytes.Equal(got.Extra, req.Extra) {
		tb.Fatalf("accepted request %+v, sent %+v", got, req)
	}
	return snd, rcv
}

func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// testCodec is a codec with FastConfig's bounds.
func testCodec(tb testing.TB) *transport.Codec {
	tb.Helper()
	cfg := transport.FastConfig()
	c, err := transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// equalElements reports the first difference between two elements, treating
// nil and empty slices alike.
func equalElements(a, b tensor.Element) (string, bool) {
	if len(a.Tensors) != len(b.Tensors) {
		return "tensor count", false
	}
	for i := range a.Tensors {
		x, y := &a.Tensors[i], &b.Tensors[i]
		switch {
		case x.Name != y.Name:
			return "name of " + x.Name, false
		case x.DType != y.DType:
			return "dtype of " + x.Name, false
		case len(x.Shape) != len(y.Shape):
			return "rank of " + x.Name, false
		case !bytes.Equal(x.Data, y.Data):
			return "data of " + x.Name, false
		case len(x.Offsets) != len(y.Offsets):
			return "offsets of " + x.Name, false
		}
		for j := range x.Shape {
			if x.Shape[j] != y.Shape[j] {
				return "shape of " + x.Name, false
			}
		}
		for j := range x.Offsets {
			if x.Offsets[j] != y.Offsets[j] {
				return "offsets of " + x.Name, false
			}
		}
	}
	return "", true
}

// rawClient opens a batch stream from the client with a hand-written Open
// message instead of a Receiver, and accepts it on the worker with
// maxWindow: for tests that play a misbehaving client. Both ends
// are closed at cleanup.
func (p *pair) rawClient(tb testing.TB, open wireMsg, maxWindow int) (net.Conn, *Sender) {
	tb.Helper()
	ctx := ctxT(tb, 5*time.Second)
	s, err := p.client.t.Dial(ctx, p.worker.addr(), transport.KindData)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := p.client.codec.WriteFrame(s, &open); err != nil {
		tb.Fatal(err)
	}
	c, err := p.worker.t.Listener(transport.KindData).Accept()
	if err != nil {
		tb.Fatal(err)
	}
	snd, _, err := Accept(ctx, p.worker.codec, c, maxWindow)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { snd.Close() })
	return s, snd
}
