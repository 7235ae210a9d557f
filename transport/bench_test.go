package transport

import (
	"io"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

// BenchmarkDataStream measures frames of 1 MiB tails over one KindData stream
// between two transports on loopback (TLS 1.3, real quic-go, DefaultConfig).
func BenchmarkDataStream(b *testing.B) {
	const size = 1 << 20
	cfg := DefaultConfig() // production timeouts: a loaded machine must not fail the run
	srv := startNode(b, nodeOpts{cfg: &cfg, noRPC: true})
	cli := startNode(b, nodeOpts{cfg: &cfg, noServer: true})
	s, err := cli.t.Dial(testutil.Ctx(b, 5*time.Second), srv.addr(), KindData)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		c, err := srv.t.Listener(KindData).Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		var h testHeader
		for {
			if _, err := srv.codec.ReadFrameInto(c, &h, func(int) []byte { return buf }); err != nil {
				if err == io.EOF {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	payload := make([]byte, size)
	h := testHeader{Job: "bench", Shapes: [][]int{{size}}}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		h.Seq++
		if err := cli.codec.WriteFrame(s, h, payload); err != nil {
			b.Fatal(err)
		}
	}
	s.CloseWrite()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMutualTLSConnect measures a client's first request to a node
// under mutual TLS: a new connection (QUIC and TLS 1.3 handshake, both
// sides verifying the other's chain and identity) and one echo RPC.
func BenchmarkMutualTLSConnect(b *testing.B) {
	p := newPKI(b, "bench")
	nc, nk := p.issue(b, RoleNode, "n1")
	srvTLS, cliTLS, _, err := MutualTLS(p.caFile, nc, nk)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	srv := startNode(b, nodeOpts{cfg: &cfg, serverTLS: srvTLS, clientTLS: cliTLS})
	cc, ck := p.issue(b, RoleClient, "alice")
	clientTLS, err := ClientTLS(p.caFile, cc, ck)
	if err != nil {
		b.Fatal(err)
	}
	codec, err := NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		b.Fatal(err)
	}
	udp, pc, _ := testutil.Loopback(b, "", false)
	defer udp.Close()
	for b.Loop() {
		t, err := New(pc, nil, clientTLS, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		var got string
		if err := Call(testutil.Ctx(b, 5*time.Second), t, codec, srv.addr(), "echo", "ping", &got); err != nil || got != "ping" {
			b.Fatalf("echo: %q, %v", got, err)
		}
		t.Close()
	}
}
