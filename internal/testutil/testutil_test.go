package testutil

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(5*time.Second, func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("Poll gave up on a condition that held on its third look")
	}
	start := time.Now()
	if Poll(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("Poll gave up after %v, before its deadline", took)
	}
}

func TestCtxEndsAtItsDeadline(t *testing.T) {
	ctx := Ctx(t, 10*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Ctx did not end at its deadline")
	}
}

// A blackholed socket neither sends nor receives; once healed, it does
// both again.
func TestBlackhole(t *testing.T) {
	udp, pc, bh := Loopback(t, "", true)
	defer udp.Close()
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	bh.On.Store(true)
	if _, err := pc.WriteTo([]byte("lost"), peer.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := peer.ReadFrom(make([]byte, 16)); err == nil {
		t.Fatalf("a blackholed socket sent %d bytes", n)
	}
	bh.On.Store(false)
	if _, err := pc.WriteTo([]byte("sent"), peer.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, _, err := peer.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "sent" {
		t.Fatalf("after the blackhole: read %q, %v", buf[:n], err)
	}
}
