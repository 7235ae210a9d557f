package transport

import (
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

// A Call under WithPrivateConn goes over a connection of its own, not the
// cache's, and the connection is closed, at both ends, once done is called.
func TestPrivateConnIsNotCachedAndCloses(t *testing.T) {
	a := startNode(t, nodeOpts{})
	b := startNode(t, nodeOpts{})
	c := startNode(t, nodeOpts{})
	ctx, done := WithPrivateConn(testutil.Ctx(t, 5*time.Second))
	var got string
	for range 2 { // both calls share the one private connection
		if err := Call(ctx, a.t, a.codec, b.addr(), "echo", "ping", &got); err != nil || got != "ping" {
			t.Fatalf("call under a private connection: %q, %v", got, err)
		}
	}
	a.t.mu.Lock()
	cached := len(a.t.dialed)
	a.t.mu.Unlock()
	if cached != 0 {
		t.Fatalf("%d connections cached after private calls, want 0", cached)
	}
	incoming := func() int {
		b.t.mu.Lock()
		defer b.t.mu.Unlock()
		return len(b.t.incoming)
	}
	if k := incoming(); k != 1 {
		t.Fatalf("b has %d incoming connections, want 1 (the private one)", k)
	}
	if _, err := a.t.Dial(ctx, c.addr(), KindControl); err == nil {
		t.Fatal("dialled a second address under one private connection")
	}
	pc := privateConnOf(ctx)
	done()
	select {
	case <-pc.conn.Context().Done():
	case <-time.After(3 * time.Second):
		t.Fatal("private connection still open after done")
	}
	if !testutil.Poll(3*time.Second, func() bool { return incoming() == 0 }) {
		t.Fatalf("b still has %d incoming connections after done", incoming())
	}
	if err := Call(ctx, a.t, a.codec, b.addr(), "echo", "ping", &got); err == nil {
		t.Fatal("call under a closed private connection succeeded")
	}
	// Without the private context, calls use (and keep) the cache.
	a.echo(t, b.addr())
	a.t.mu.Lock()
	cached = len(a.t.dialed)
	a.t.mu.Unlock()
	if cached != 1 {
		t.Fatalf("%d connections cached after an ordinary call, want 1", cached)
	}
}
