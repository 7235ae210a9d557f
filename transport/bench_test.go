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
