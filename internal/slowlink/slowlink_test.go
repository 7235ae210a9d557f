package slowlink

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A slow link can only make reads slower: three datagrams of 1,000 bytes at
// 100 kB/s take at least 30 ms to come through, and arrive intact.
func TestSlowLinkPaces(t *testing.T) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	link := New(rx, 100_000, 64<<10)
	defer link.Close()
	msg := make([]byte, 1000)
	for i := range 3 {
		msg[0] = byte(i)
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	buf := make([]byte, 2000)
	for i := range 3 {
		n, _, err := link.ReadFrom(buf)
		if err != nil || n != 1000 || buf[0] != byte(i) {
			t.Fatalf("datagram %d: %d bytes, first %d, %v", i, n, buf[0], err)
		}
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("3,000 bytes at 100 kB/s came through in %v, want >= 30ms", d)
	}
}

// Datagrams that would wait behind more than the queue's bytes are
// dropped; those within it come through in order.
func TestSlowLinkDropsBeyondItsQueue(t *testing.T) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	link := New(rx, 10_000, 2500) // 10 kB/s: 1,000-byte datagrams leave 0.1 s apart
	defer link.Close()
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	msg := make([]byte, 1000)
	for i := range 6 {
		msg[0] = byte(i)
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	// The first starts at once, two more fit the 2,500-byte queue behind
	// it, the other three are dropped.
	buf := make([]byte, 2000)
	if n, _, err := link.ReadFrom(buf); err != nil || n != 1000 || buf[0] != 0 {
		t.Fatalf("first datagram: %d bytes, first byte %d, %v", n, buf[0], err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(link.q)+int(link.dropped.Load()) < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling the link's counts
	}
	if q, d := len(link.q), link.dropped.Load(); q != 2 || d != 3 {
		t.Fatalf("%d datagrams queued behind the first and %d dropped, want 2 and 3", q, d)
	}
	for i := 1; i <= 2; i++ {
		if n, _, err := link.ReadFrom(buf); err != nil || n != 1000 || buf[0] != byte(i) {
			t.Fatalf("datagram %d: %d bytes, first byte %d, %v", i, n, buf[0], err)
		}
	}
}

// Close ends a ReadFrom that waits, and the link's goroutine.
func TestSlowLinkClose(t *testing.T) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	link := New(rx, 1000, 1000)
	errc := make(chan error, 1)
	go func() {
		_, _, err := link.ReadFrom(make([]byte, 10))
		errc <- err
	}()
	link.Close()
	if err := <-errc; err == nil {
		t.Fatal("ReadFrom after Close returned no error")
	}
}

// TestDelay: datagrams through a Delay arrive after its delay, within its
// jitter, in the order sent, and a new delay applies from the next one.
func TestDelay(t *testing.T) {
	recv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var base atomic.Int64
	base.Store(int64(20 * time.Millisecond))
	d := NewDelay(recv, func() (time.Duration, time.Duration) { return time.Duration(base.Load()), 5 * time.Millisecond })
	defer d.Close()
	send, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	measure := func() []time.Duration {
		var out []time.Duration
		buf := make([]byte, 16)
		for i := range 20 {
			t0 := time.Now()
			if _, err := send.WriteTo([]byte{byte(i)}, recv.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			n, _, err := d.ReadFrom(buf)
			if err != nil || n != 1 || buf[0] != byte(i) {
				t.Fatalf("datagram %d: %d bytes %v, err %v", i, n, buf[:n], err)
			}
			out = append(out, time.Since(t0))
		}
		return out
	}
	for _, el := range measure() {
		if el < 15*time.Millisecond || el > 200*time.Millisecond {
			t.Errorf("20 ms ± 5 ms delay: a datagram took %v", el)
		}
	}
	base.Store(0)
	for _, el := range measure() {
		if el > 50*time.Millisecond {
			t.Errorf("0 ± 5 ms delay: a datagram took %v", el)
		}
	}
	// In order: a later datagram never overtakes an earlier one.
	last := time.Time{}
	for range 1000 {
		at := At(time.Now(), last, 2*time.Millisecond, 2*time.Millisecond)
		if at.Before(last) {
			t.Fatal("At went back in time")
		}
		last = at
	}
}
