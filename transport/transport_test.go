package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

func acceptT(tb testing.TB, l net.Listener) *Stream {
	tb.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			tb.Fatalf("accept: %v", r.err)
		}
		return r.c.(*Stream)
	case <-time.After(5 * time.Second):
		tb.Fatal("accept timed out")
	}
	return nil
}

func TestDialEachKindRoundTrip(t *testing.T) {
	a := startNode(t, nodeOpts{noRPC: true})
	b := startNode(t, nodeOpts{noRPC: true})
	for _, kind := range []StreamKind{KindRaft, KindControl, KindData} {
		t.Run(kind.String(), func(t *testing.T) {
			s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), kind)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			msg := []byte("hello " + kind.String())
			if _, err := s.Write(msg); err != nil {
				t.Fatal(err)
			}
			srv := acceptT(t, b.t.Listener(kind))
			defer srv.Close()
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(srv, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("server read %q, want %q", got, msg)
			}
			if srv.RemoteAddr().String() != a.addr() {
				t.Fatalf("server sees remote %s, want %s", srv.RemoteAddr(), a.addr())
			}
			if _, err := srv.Write([]byte("re:" + string(msg))); err != nil {
				t.Fatal(err)
			}
			srv.Close()
			back, err := io.ReadAll(s)
			if err != nil {
				t.Fatalf("client read: %v", err)
			}
			if string(back) != "re:"+string(msg) {
				t.Fatalf("client read %q", back)
			}
		})
	}
	// Raft and control streams shared one connection, data streams use a second.
	a.t.mu.Lock()
	nDialed := len(a.t.dialed)
	a.t.mu.Unlock()
	b.t.mu.Lock()
	nIncoming := len(b.t.incoming)
	b.t.mu.Unlock()
	if nDialed != 2 || nIncoming != 2 {
		t.Fatalf("connections: %d dialled by a, %d incoming at b; want 2 and 2", nDialed, nIncoming)
	}
	if a.t.Listener(KindData) != a.t.Listener(KindData) {
		t.Fatal("Listener returned different listeners for one kind")
	}
}

func TestManyConcurrentStreams(t *testing.T) {
	a := startNode(t, nodeOpts{noRPC: true})
	b := startNode(t, nodeOpts{noRPC: true})
	const n = 200
	l := b.t.Listener(KindData)
	var srvWG sync.WaitGroup
	srvWG.Go(func() {
		var wg sync.WaitGroup
		for range n {
			c, err := l.Accept()
			if err != nil {
				t.Errorf("accept: %v", err)
				return
			}
			wg.Go(func() { // echo until EOF
				defer c.Close()
				if _, err := io.Copy(c, c); err != nil {
					t.Errorf("echo: %v", err)
				}
			})
		}
		wg.Wait()
	})
	ctx := testutil.Ctx(t, 10*time.Second)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := a.t.Dial(ctx, b.addr(), KindData)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			defer s.Close()
			msg := bytes.Repeat([]byte(fmt.Sprintf("stream %d;", i)), 1000)
			// Read while writing: the connection's receive window is shared,
			// so unread echoes of other streams could otherwise block ours.
			var got []byte
			var rerr error
			read := make(chan struct{})
			go func() { got, rerr = io.ReadAll(s); close(read) }()
			_, err = s.Write(msg)
			s.CloseWrite()
			<-read
			if err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			if rerr != nil || !bytes.Equal(got, msg) {
				t.Errorf("stream %d: got %d bytes (err %v), want %d", i, len(got), rerr, len(msg))
			}
		})
	}
	wg.Wait()
	srvWG.Wait()
	// 200 cold concurrent Dials shared one handshake: one connection each side.
	a.t.mu.Lock()
	nDialed := len(a.t.dialed)
	a.t.mu.Unlock()
	b.t.mu.Lock()
	nIncoming := len(b.t.incoming)
	b.t.mu.Unlock()
	if nDialed != 1 || nIncoming != 1 {
		t.Fatalf("%d connections cached by a, %d incoming at b; want 1 and 1", nDialed, nIncoming)
	}
}

// TestStreamNetConnSemantics checks what raft's NetworkTransport relies on.
func TestStreamNetConnSemantics(t *testing.T) {
	a := startNode(t, nodeOpts{noRPC: true})
	b := startNode(t, nodeOpts{noRPC: true})
	dial := func() (*Stream, *Stream) {
		s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindRaft)
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte{0})
		srv := acceptT(t, b.t.Listener(KindRaft))
		var one [1]byte
		if _, err := io.ReadFull(srv, one[:]); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); srv.Close() })
		return s, srv
	}
	readErr := func(c net.Conn) chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 10))
			ch <- err
		}()
		return ch
	}
	waitErr := func(ch chan error, what string) error {
		select {
		case err := <-ch:
			if err == nil {
				t.Fatalf("%s: read returned no error", what)
			}
			return err
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: read still blocked", what)
		}
		return nil
	}

	t.Run("peer close gives EOF", func(t *testing.T) {
		s, srv := dial()
		ch := readErr(srv)
		s.Close()
		if err := waitErr(ch, "peer read"); err != io.EOF {
			t.Fatalf("peer read: %v, want io.EOF", err)
		}
	})
	t.Run("local close unblocks read", func(t *testing.T) {
		s, _ := dial()
		ch := readErr(s)
		s.Close()
		if err := waitErr(ch, "local read"); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("local read: %v, want net.ErrClosed", err)
		}
		if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after close: %v, want net.ErrClosed", err)
		}
	})
	t.Run("local close unblocks write", func(t *testing.T) {
		s, _ := dial() // the peer never reads: flow control blocks the writer
		werr := make(chan error, 1)
		go func() {
			_, err := s.Write(make([]byte, 64<<20))
			werr <- err
		}()
		select {
		case err := <-werr:
			t.Fatalf("64 MiB write to a peer that does not read returned early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		s.Close()
		select {
		case err := <-werr:
			if err == nil {
				t.Fatal("blocked write returned no error after Close")
			}
		case <-time.After(3 * time.Second):
			t.Fatal("Close left a Write blocked")
		}
	})
	t.Run("write to closed peer fails", func(t *testing.T) {
		s, srv := dial()
		srv.Close()
		deadline := time.Now().Add(3 * time.Second)
		var err error
		for err == nil && time.Now().Before(deadline) {
			_, err = s.Write(make([]byte, 1024))
		}
		if err == nil {
			t.Fatal("writes to a closed peer kept succeeding")
		}
	})
	t.Run("read deadline", func(t *testing.T) {
		s, _ := dial()
		s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		err := waitErr(readErr(s), "deadline read")
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read past deadline: %v, want a timeout net.Error", err)
		}
		// Clearing the deadline makes the stream usable again.
		s.SetDeadline(time.Time{})
		if _, err := s.Write([]byte("ok")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("addresses", func(t *testing.T) {
		s, srv := dial()
		if s.LocalAddr().String() != a.addr() || s.RemoteAddr().String() != b.addr() {
			t.Fatalf("client addrs %s -> %s", s.LocalAddr(), s.RemoteAddr())
		}
		if srv.LocalAddr().String() != b.addr() {
			t.Fatalf("server local addr %s", srv.LocalAddr())
		}
		if s.Quic() == nil {
			t.Fatal("Quic() is nil")
		}
	})
}

func TestCloseIsPromptAndIdempotent(t *testing.T) {
	a := startNode(t, nodeOpts{noRPC: true})
	b := startNode(t, nodeOpts{noRPC: true})
	s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindData)
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("x"))
	srv := acceptT(t, b.t.Listener(KindData))
	if _, err := io.ReadFull(srv, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 2)
	go func() { _, err := srv.Read(make([]byte, 10)); blocked <- err }()
	go func() { _, err := b.t.Listener(KindControl).Accept(); blocked <- err }()
	start := time.Now()
	b.t.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %s", d)
	}
	for range 2 {
		select {
		case err := <-blocked:
			if err == nil {
				t.Fatal("blocked call returned no error after Close")
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Close left a Read or Accept blocked")
		}
	}
	b.t.Close()
	if _, err := b.t.Dial(testutil.Ctx(t, time.Second), a.addr(), KindData); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dial after close: %v", err)
	}
	// The peer learns at once (CONNECTION_CLOSE), not after the idle timeout.
	_, err = s.Read(make([]byte, 10))
	if err == nil {
		t.Fatal("read from closed peer succeeded")
	}
}

func TestDeriveStatelessResetKey(t *testing.T) {
	a, b, c := DeriveStatelessResetKey([]byte("node-1")), DeriveStatelessResetKey([]byte("node-1")), DeriveStatelessResetKey([]byte("node-2"))
	if *a != *b || *a == *c {
		t.Fatal("key derivation is not a deterministic function of the secret")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), FastConfig()} {
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]func(*Config){
		"MaxHeaderBytes":          func(c *Config) { c.MaxHeaderBytes = 0 },
		"MaxFrameBytes":           func(c *Config) { c.MaxFrameBytes = 10 },
		"KeepAlivePeriod":         func(c *Config) { c.KeepAlivePeriod = c.MaxIdleTimeout },
		"AcceptBacklog":           func(c *Config) { c.AcceptBacklog = 0 },
		"MaxIncomingStreams":      func(c *Config) { c.MaxIncomingStreams = -1 },
		"KindHeaderTimeout":       func(c *Config) { c.KindHeaderTimeout = 0 },
		"ConnectionReceiveWindow": func(c *Config) { c.ConnectionReceiveWindow = 1 },
	}
	for field, mut := range cases {
		c := DefaultConfig()
		mut(&c)
		err := c.Validate()
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(field)) {
			t.Errorf("%s: Validate() = %v, want an error naming the field", field, err)
		}
	}
}

// TestUnreadDataDoesNotBlockControl: data streams whose receiver does not read
// fill their connection's flow-control window; RPCs (and Raft) to the same
// peer run on another connection and still go through.
func TestUnreadDataDoesNotBlockControl(t *testing.T) {
	b := startNode(t, nodeOpts{})
	a := startNode(t, nodeOpts{noServer: true})
	s, err := a.t.Dial(testutil.Ctx(t, 3*time.Second), b.addr(), KindData)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := acceptT(t, b.t.Listener(KindData)) // accepted, never read
	defer srv.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 32<<20))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("32 MiB to a reader that never reads did not block: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	a.echo(t, b.addr())
	s.Close() // unblocks the writer
	<-wrote
}
