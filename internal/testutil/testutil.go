package testutil

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Ctx is a context that ends d from now, or when the test (and its
// cleanups registered before this call) ends.
func Ctx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// pollEvery is how often WaitFor looks again.
const pollEvery = 2 * time.Millisecond

// WaitFor polls cond every few milliseconds until it holds; when d passes
// first, it fails the test naming what was awaited.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(d, cond) {
		tb.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Poll evaluates cond every few milliseconds until it returns true (true)
// or d passes (false), for a test that has more to say than WaitFor's
// message when the wait fails.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// Blackhole wraps a socket so that a test can make its host vanish: while
// On is set, every datagram in either direction is dropped, as if the
// host died without closing anything.
type Blackhole struct {
	net.PacketConn
	On atomic.Bool
}

func (b *Blackhole) WriteTo(p []byte, addr net.Addr) (int, error) {
	if b.On.Load() {
		return len(p), nil
	}
	return b.PacketConn.WriteTo(p, addr)
}

func (b *Blackhole) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, addr, err := b.PacketConn.ReadFrom(p)
		if err != nil || !b.On.Load() {
			return n, addr, err
		}
	}
}

// Loopback listens on a UDP socket at addr ("" for a free port on
// 127.0.0.1). With faulty, the socket a transport should use is wrapped in
// a Blackhole (returned); otherwise it is the bare *net.UDPConn, so that
// quic-go keeps its fast paths (GSO, socket buffers). The caller closes
// udp (a transport on it first).
func Loopback(tb testing.TB, addr string, faulty bool) (udp *net.UDPConn, pc net.PacketConn, bh *Blackhole) {
	tb.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	udp, err = net.ListenUDP("udp", ua)
	if err != nil {
		tb.Fatal(err)
	}
	if !faulty {
		return udp, udp, nil
	}
	bh = &Blackhole{PacketConn: udp}
	return udp, bh, bh
}
