package batch

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/internal/testutil/quictest"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pair is a worker node and a client node.
type pair struct {
	worker, client *quictest.Node
}

func newPair(tb testing.TB, cfg transport.Config) *pair {
	return &pair{worker: quictest.Start(tb, quictest.Options{Config: &cfg}), client: quictest.Start(tb, quictest.Options{Config: &cfg, ClientOnly: true})}
}

// newFaultyPair is newPair with a worker whose socket can be blackholed
// (worker.Fault).
func newFaultyPair(tb testing.TB, cfg transport.Config) *pair {
	return &pair{worker: quictest.Start(tb, quictest.Options{Config: &cfg, Faulty: true}), client: quictest.Start(tb, quictest.Options{Config: &cfg, ClientOnly: true})}
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
	ctx := testutil.Ctx(tb, 5*time.Second)
	rcv, err := OpenConfig(ctx, p.client.T, p.client.Codec, p.worker.Addr(), req, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rcv.Close() })
	c, err := p.worker.T.Listener(transport.KindData).Accept()
	if err != nil {
		tb.Fatal(err)
	}
	if wrap != nil {
		c = wrap(c)
	}
	snd, got, err := Accept(ctx, p.worker.Codec, c, maxWindow)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { snd.Close() })
	if got.Job != req.Job || got.Consumer != req.Consumer || got.Window != req.Window || !bytes.Equal(got.Extra, req.Extra) {
		tb.Fatalf("accepted request %+v, sent %+v", got, req)
	}
	return snd, rcv
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
	ctx := testutil.Ctx(tb, 5*time.Second)
	s, err := p.client.T.Dial(ctx, p.worker.Addr(), transport.KindData)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := p.client.Codec.WriteFrame(s, &open); err != nil {
		tb.Fatal(err)
	}
	c, err := p.worker.T.Listener(transport.KindData).Accept()
	if err != nil {
		tb.Fatal(err)
	}
	snd, _, err := Accept(ctx, p.worker.Codec, c, maxWindow)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { snd.Close() })
	return s, snd
}
