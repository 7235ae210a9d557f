package mesh_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// Test 7 at node level: garbage on the node's QUIC port and on its control
// streams is rejected, and the node keeps answering. (transport's own tests
// cover each malformed-frame case in detail.)
func TestNodeSurvivesBadInput(t *testing.T) {
	c := testcluster.Start(t, 1)
	n := c.Node(0)

	// Garbage datagrams straight at the UDP port.
	conn, err := net.Dial("udp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1200)
	for i := 0; i < 200; i++ {
		rand.Read(buf[:1+i%len(buf)])
		conn.Write(buf[:1+i%len(buf)])
	}
	conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, n.Addr(), client.Options{TLS: mustClientTLS(t), Transport: &fast})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Random bytes on a raw control stream, and an unknown stream kind.
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
	for _, kind := range []transport.StreamKind{transport.KindControl, 0x7f} {
		s, err := tr.Dial(ctx, n.Addr(), kind)
		if err != nil {
			t.Fatalf("dial kind %d: %v", kind, err)
		}
		junk := make([]byte, 4096)
		rand.Read(junk)
		s.Write(junk)
		s.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, rerr := s.Read(make([]byte, 1<<16))
		s.Close()
		t.Logf("kind %d: read after junk: %v", kind, rerr)
	}

	// An unknown method is a typed error, not a hang.
	codec, err := transport.NewCodec(64<<10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := transport.Call(ctx, tr, codec, n.Addr(), "no.such.method", struct{}{}, nil); err == nil {
		t.Fatal("unknown method succeeded")
	}

	// A link probe is bounded: too large (or negative) is refused with a
	// typed error; one within the bound gets its bytes.
	for _, b := range []int{api.MaxProbeBytes + 1, -1} {
		if err := transport.Call(ctx, tr, codec, n.Addr(), api.MethodProbe, api.ProbeRequest{Bytes: b}, nil); !errors.Is(err, transport.ErrInvalid) {
			t.Fatalf("probe of %d bytes: %v, want invalid", b, err)
		}
	}
	probeCodec, err := transport.NewCodec(64<<10, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	var pr api.ProbeResponse
	if err := transport.Call(ctx, tr, probeCodec, n.Addr(), api.MethodProbe, api.ProbeRequest{Bytes: 1000}, &pr); err != nil || len(pr.Payload) != 1000 {
		t.Fatalf("probe of 1000 bytes: %d bytes, %v", len(pr.Payload), err)
	}
	// Probes answered at once are few (each holds its answer until it is
	// written): one more is told to come back, and a slot freed serves it.
	giveBack := n.HoldProbes()
	if err := transport.Call(ctx, tr, probeCodec, n.Addr(), api.MethodProbe, api.ProbeRequest{Bytes: 1000}, &pr); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("probe with every slot held: %v, want unavailable", err)
	}
	giveBack()
	for range 8 { // more than the slots: each gives its slot back once written
		if err := transport.Call(ctx, tr, probeCodec, n.Addr(), api.MethodProbe, api.ProbeRequest{Bytes: 1000}, &pr); err != nil {
			t.Fatalf("probe after the slots were given back: %v", err)
		}
	}

	// The node still answers.
	ms, err := cl.Members(ctx)
	if err != nil || len(ms) != 1 {
		t.Fatalf("members after bad input: %v %v", ms, err)
	}
	if _, err := cl.Put(ctx, "still", []byte("serving")); err != nil {
		t.Fatalf("put after bad input: %v", err)
	}
}

func mustClientTLS(t *testing.T) *tls.Config {
	t.Helper()
	c, err := transport.ClientTLS("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}
