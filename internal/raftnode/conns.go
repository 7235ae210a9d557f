package raftnode

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// trackedLayer wraps the mesh's StreamLayer so Close can end raft's
// connection goroutines. NetworkTransport.Close only closes the listener: a
// goroutine serving an inbound connection keeps reading until the peer hangs
// up, which for a pooled connection may be never. Node.Close closes every
// connection seen here and waits for inbound handlers to let go of theirs.
type trackedLayer struct {
	raft.StreamLayer

	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	inbound int           // accepted conns not yet closed by their handler
	idle    chan struct{} // closed when inbound drops to 0 after shutdown
	closed  bool
}

var errLayerClosed = errors.New("raftnode: stream layer closed")

func newTrackedLayer(l raft.StreamLayer) *trackedLayer {
	return &trackedLayer{StreamLayer: l, conns: make(map[*trackedConn]struct{}), idle: make(chan struct{})}
}

// Accept implements net.Listener.
func (t *trackedLayer) Accept() (net.Conn, error) {
	c, err := t.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return t.track(c, true)
}

// Dial implements raft.StreamLayer.
func (t *trackedLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := t.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	return t.track(c, false)
}

func (t *trackedLayer) track(c net.Conn, inbound bool) (net.Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = c.Close()
		return nil, errLayerClosed
	}
	tc := &trackedConn{Conn: c, layer: t, inbound: inbound}
	t.conns[tc] = struct{}{}
	if inbound {
		t.inbound++
	}
	return tc, nil
}

func (t *trackedLayer) release(tc *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.conns[tc]; !ok {
		return
	}
	delete(t.conns, tc)
	if tc.inbound {
		t.inbound--
		if t.closed && t.inbound == 0 {
			close(t.idle)
		}
	}
}

// shutdown closes every tracked connection and waits, at most wait, until
// the handlers of inbound ones have returned (they close their conn last).
func (t *trackedLayer) shutdown(wait time.Duration) bool {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		if t.inbound == 0 {
			close(t.idle)
		}
	}
	for tc := range t.conns {
		_ = tc.Conn.Close() // underlying only: the owner's Close releases it
	}
	t.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-t.idle:
		return true
	case <-timer.C:
		return false
	}
}

type trackedConn struct {
	net.Conn
	layer   *trackedLayer
	inbound bool
	once    sync.Once
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.layer.release(c) })
	return err
}
