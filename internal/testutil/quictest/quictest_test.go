package quictest

import (
	"context"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/transport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A client-only node reaches an echoing server; once the server's socket
// is blackholed, a new call fails by its deadline instead of answering.
func TestEchoAndBlackhole(t *testing.T) {
	srv := Start(t, Options{Echo: true, Faulty: true})
	cli := Start(t, Options{ClientOnly: true})
	cli.Echo(t, srv.Addr())

	srv.Fault.On.Store(true)
	other := Start(t, Options{ClientOnly: true}) // no connection to reuse
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var got string
	if err := transport.Call(ctx, other.T, other.Codec, srv.Addr(), "echo", "ping", &got); err == nil {
		t.Fatalf("a blackholed server answered %q", got)
	}
}
