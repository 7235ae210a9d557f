package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/quic-go/quic-go"
)

// TestRestartedPeerResetsStaleConnection: a peer that crashed (no
// CONNECTION_CLOSE) and restarted on the same port with the same stateless
// reset key is reachable again at once, not after the idle timeout.
func TestRestartedPeerResetsStaleConnection(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxIdleTimeout = 10 * time.Second // so only the stateless reset can explain a quick recovery
	cfg.KeepAlivePeriod = time.Second
	key := &quic.StatelessResetKey{1, 2, 3}
	cfg.StatelessResetKey = key
	srvTLS, cliTLS, err := DevTLS(t.TempDir(), "b")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordHandler{}
	a := startNode(t, nodeOpts{cfg: &cfg, log: slog.New(rec)})
	b := startNode(t, nodeOpts{cfg: &cfg, faulty: true, serverTLS: srvTLS, clientTLS: cliTLS})
	addr := b.addr()
	a.echo(t, addr)

	// Crash: nothing b sends from now on leaves the host.
	b.fc.On.Store(true)
	b.stop()

	a.t.mu.Lock()
	stale := a.t.dialed[connKey{addr: addr}].conn
	a.t.mu.Unlock()

	b2 := startNode(t, nodeOpts{cfg: &cfg, addr: addr, serverTLS: srvTLS, clientTLS: cliTLS})
	start := time.Now()
	a.echo(t, b2.addr())
	var sr *quic.StatelessResetError
	if cause := context.Cause(stale.Context()); !errors.As(cause, &sr) {
		t.Fatalf("stale connection ended with %v, want a stateless reset", cause)
	}
	if n := rec.count(msgStaleRetry); n != 1 {
		t.Fatalf("%d retries after a stateless reset, want 1 (the call must have used the stale connection)", n)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("first call after restart took %s", d)
	}
	a.echo(t, b2.addr())
}

// TestVanishedPeerFailsRead: a blocked Read on a stream to a peer whose host
// vanished returns an error within about MaxIdleTimeout.
func TestVanishedPeerFailsRead(t *testing.T) {
	a := startNode(t, nodeOpts{noRPC: true})
	b := startNode(t, nodeOpts{noRPC: true, faulty: true})
	s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindData)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Write([]byte("x"))
	srv := acceptT(t, b.t.Listener(KindData))
	defer srv.Close()
	readErr := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		readErr <- err
	}()
	b.fc.On.Store(true)
	start := time.Now()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("read succeeded")
		}
		idle := FastConfig().MaxIdleTimeout
		if d := time.Since(start); d > idle+time.Second {
			t.Fatalf("read failed after %s, want about %s", d, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still blocked 5s after the peer vanished")
	}
	// The dead connection is gone from the cache: a new dial does not reuse it.
	a.t.mu.Lock()
	e := a.t.dialed[keyFor(b.addr(), KindData)]
	a.t.mu.Unlock()
	if e != nil && e.conn.Context().Err() != nil {
		t.Fatal("a dead connection is still cached")
	}
}

// TestBadInput feeds one node each kind of hostile input; after each the input
// is rejected, and the node still answers an RPC.
func TestBadInput(t *testing.T) {
	b := startNode(t, nodeOpts{})
	a := startNode(t, nodeOpts{noServer: true})
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.UintN(256))
		}
		return p
	}
	// rawRequest sends raw bytes on a control stream and returns the response.
	rawRequest := func(t *testing.T, raw []byte) rpcResponse {
		t.Helper()
		s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindControl)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := s.Write(raw); err != nil {
			t.Fatal(err)
		}
		var resp rpcResponse
		if _, err := a.codec.ReadFrame(s, &resp); err != nil {
			t.Fatalf("no error response: %v", err)
		}
		var one [1]byte
		if n, err := s.Read(one[:]); n != 0 || err == nil {
			t.Fatalf("stream still open after the error response: %d bytes, %v", n, err)
		}
		return resp
	}
	expectInvalid := func(t *testing.T, resp rpcResponse, substr string) {
		t.Helper()
		if resp.Code != ErrInvalid.Code || !strings.Contains(resp.Message, substr) {
			t.Fatalf("response %+v, want %s mentioning %q", resp, ErrInvalid.Code, substr)
		}
	}
	prefix := func(hl uint32, tl uint64) []byte {
		p := make([]byte, prefixLen)
		p[0] = frameVersion
		binary.BigEndian.PutUint32(p[1:5], hl)
		binary.BigEndian.PutUint64(p[5:13], tl)
		return p
	}

	t.Run("garbage datagrams", func(t *testing.T) {
		uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		dst := b.t.Addr()
		for i := range 300 {
			p := random(1 + rng.IntN(1400))
			switch i % 3 {
			case 0: // looks like a QUIC v1 Initial
				p = append([]byte{0xc0, 0, 0, 0, 1, 8}, random(1250)...)
			case 1: // short header packet for an unknown connection
				p[0] = 0x40 | p[0]&0x3f
			}
			if _, err := uc.WriteTo(p, dst); err != nil {
				t.Fatal(err)
			}
		}
		a.echo(t, b.addr())
	})
	t.Run("random bytes on control stream", func(t *testing.T) {
		raw := append([]byte{0xff}, random(4096)...)
		expectInvalid(t, rawRequest(t, raw), "malformed frame")
		raw = append(prefix(40, 0), random(40)...) // valid prefix, garbage CBOR
		expectInvalid(t, rawRequest(t, raw), "malformed frame")
		a.echo(t, b.addr())
	})
	t.Run("10 GiB frame", func(t *testing.T) {
		raw := append(prefix(1, 10<<30), 0xf6)
		expectInvalid(t, rawRequest(t, raw), "frame too large")
		a.echo(t, b.addr())
	})
	t.Run("request over the RPC request bound", func(t *testing.T) {
		raw := append(prefix(1, DefaultMaxRPCRequestBytes), 0xf6)
		expectInvalid(t, rawRequest(t, raw), "frame too large")
		a.echo(t, b.addr())
	})
	t.Run("deep nesting", func(t *testing.T) {
		hdr := append(bytes.Repeat([]byte{0x81}, 10000), 0x00)
		raw := append(prefix(uint32(len(hdr)), 0), hdr...)
		expectInvalid(t, rawRequest(t, raw), "exceeded max nested level")
		a.echo(t, b.addr())
	})
	t.Run("unknown method", func(t *testing.T) {
		err := Call(testutil.Ctx(t, 3*time.Second), a.t, a.codec, b.addr(), "no/such", nil, nil)
		if !errors.Is(err, ErrUnknownMethod) {
			t.Fatalf("unknown method: %v", err)
		}
		a.echo(t, b.addr())
	})
	t.Run("unknown stream kind", func(t *testing.T) {
		s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), StreamKind(99))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		expectReset(t, s.Quic(), 3*time.Second)
		a.echo(t, b.addr())
	})
	t.Run("no kind byte", func(t *testing.T) {
		c, _, err := a.t.conn(testutil.Ctx(t, 3*time.Second), keyFor(b.addr(), KindData))
		if err != nil {
			t.Fatal(err)
		}
		silent, err := c.OpenStreamSync(testutil.Ctx(t, 3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer silent.CancelRead(0)
		// The peer learns of a silent stream when a later stream on the same
		// connection arrives.
		later, err := c.OpenStreamSync(testutil.Ctx(t, 3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer resetStream(later, 0)
		if _, err := later.Write([]byte{byte(KindData)}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		expectReset(t, silent, 3*time.Second)
		if d := time.Since(start); d < FastConfig().KindHeaderTimeout/2 {
			t.Fatalf("silent stream reset after %s, before KindHeaderTimeout", d)
		}
		acceptT(t, b.t.Listener(KindData)).Close()
		a.echo(t, b.addr())
	})
}

// expectReset waits for the peer to reset qs.
func expectReset(t *testing.T, qs *quic.Stream, within time.Duration) {
	t.Helper()
	qs.SetReadDeadline(time.Now().Add(within))
	_, err := qs.Read(make([]byte, 1))
	var se *quic.StreamError
	if !errors.As(err, &se) || !se.Remote || se.ErrorCode != codeRejected {
		t.Fatalf("read: %v, want a reset by the peer with code %d", err, codeRejected)
	}
}

// TestAcceptBacklogFull: streams beyond AcceptBacklog are reset, not queued.
func TestAcceptBacklogFull(t *testing.T) {
	cfg := FastConfig()
	cfg.AcceptBacklog = 2
	b := startNode(t, nodeOpts{cfg: &cfg, noRPC: true})
	a := startNode(t, nodeOpts{noServer: true})
	var streams []*Stream
	for range 3 {
		s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindData)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams = append(streams, s)
	}
	resets := 0
	for _, s := range streams {
		s.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := s.Read(make([]byte, 1))
		var se *quic.StreamError
		if errors.As(err, &se) && se.Remote {
			resets++
		}
	}
	if resets != 1 {
		t.Fatalf("%d of 3 streams reset with a backlog of 2, want 1", resets)
	}
}

// TestMaxIncomingConns: connections beyond the bound are closed at once.
func TestMaxIncomingConns(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxIncomingConns = 1
	b := startNode(t, nodeOpts{cfg: &cfg})
	first := startNode(t, nodeOpts{noServer: true})
	first.echo(t, b.addr())
	second := startNode(t, nodeOpts{noServer: true})
	err := Call(testutil.Ctx(t, 3*time.Second), second.t, second.codec, b.addr(), "echo", "x", nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "too many connections") {
		t.Fatalf("second connection: %v, want it refused", err)
	}
	first.echo(t, b.addr())
}

// TestForgetDuringDial: a stream failing on an old connection (forget)
// while a dial is in flight leaves the in-flight entry alone; the failed
// dial then leaves the cache, and a dropped connection is replaced. CI's
// race detector once caught forget reading the entry while the dial wrote
// it (both now under the lock); this test runs that path, though the
// detector does not flag it here without the fix (quic-go synchronises the
// two goroutines along the way).
func TestForgetDuringDial(t *testing.T) {
	a := startNode(t, nodeOpts{})
	b := startNode(t, nodeOpts{})
	a.echo(t, b.addr())
	a.t.mu.Lock()
	old := a.t.dialed[connKey{addr: b.addr()}].conn
	a.t.mu.Unlock()

	// A peer that never answers: the dial to it stays in flight until ctx ends.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	key := connKey{addr: silent.LocalAddr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := a.t.conn(ctx, key)
		done <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "the dial to show up in the cache", func() bool {
		a.t.mu.Lock()
		defer a.t.mu.Unlock()
		_, inFlight := a.t.dialed[key]
		return inFlight
	})
	a.t.forget(key, old) // not key's connection: closes old, keeps the entry
	a.t.mu.Lock()
	_, kept := a.t.dialed[key]
	a.t.mu.Unlock()
	if !kept {
		t.Error("forget dropped the in-flight dial of another connection")
	}
	if err := <-done; err == nil {
		t.Fatal("dial to a silent peer succeeded")
	}
	a.t.mu.Lock()
	_, kept = a.t.dialed[key]
	a.t.mu.Unlock()
	if kept {
		t.Error("the failed dial is still cached")
	}
	if old.Context().Err() == nil {
		t.Error("forget left the connection open")
	}
	a.echo(t, b.addr()) // the closed connection is replaced
}

// TestGivingUpOnAStreamKeepsTheConnection: a caller whose ctx ends while
// the peer allows no further stream (MaxIncomingStreams) gets an error, and
// the connection, with the other callers' streams on it, stays up. Dial used
// to drop and close it, cutting every RPC in flight to that peer.
func TestGivingUpOnAStreamKeepsTheConnection(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxIncomingStreams = 2
	a := startNode(t, nodeOpts{noRPC: true})
	b := startNode(t, nodeOpts{noRPC: true, cfg: &cfg})
	var open []*Stream
	for i := range 2 {
		s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindControl)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		defer s.Close()
		open = append(open, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if s, err := a.t.Dial(ctx, b.addr(), KindControl); err == nil {
		s.Close()
		t.Fatal("a third stream opened past the peer's limit of 2")
	}
	a.t.mu.Lock()
	e := a.t.dialed[connKey{addr: b.addr()}]
	a.t.mu.Unlock()
	if e == nil || e.conn != open[0].conn || e.conn.Context().Err() != nil {
		t.Fatal("the connection was dropped")
	}
	for i, s := range open {
		if _, err := s.Write([]byte{'0' + byte(i)}); err != nil {
			t.Fatalf("stream %d after the failed open: %v", i, err)
		}
	}
	l := b.t.Listener(KindControl)
	seen := map[byte]bool{}
	for range open { // accepted in any order
		srv := acceptT(t, l)
		defer srv.Close()
		_ = srv.SetReadDeadline(time.Now().Add(3 * time.Second))
		got := make([]byte, 1)
		if _, err := io.ReadFull(srv, got); err != nil {
			t.Fatalf("server read after the failed open: %v", err)
		}
		seen[got[0]] = true
	}
	if !seen['0'] || !seen['1'] {
		t.Fatalf("server read %v, want a byte from each stream", seen)
	}
}
