package transport

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/quic-go/quic-go"
)

// The dialling side: streams opened on cached connections to each peer
// address, one for Raft and control streams and DataConns for data and
// cache streams, each dialled once for concurrent callers and redialled
// when it died.

// connKey names a cached outgoing connection: one per peer address for Raft and
// control streams, and a separate one for data streams. Flow-control windows
// are per connection, so unread batches on data streams (bounded by the
// client's credit, yet possibly many MiB) must not stall Raft heartbeats or
// control RPCs behind a full connection window.
type connKey struct {
	addr string
	data bool
	lane int // which of the DataConns data connections
}

func keyFor(addr string, kind StreamKind) connKey {
	return connKey{addr: addr, data: kind == KindData || kind == KindCache}
}

// keyForDial is keyFor, with data streams spread over DataConns lanes.
func (t *Transport) keyForDial(addr string, kind StreamKind) connKey {
	k := keyFor(addr, kind)
	if k.data && t.cfg.DataConns > 1 {
		k.lane = int(t.dataLane.Add(1) % uint32(t.cfg.DataConns))
	}
	return k
}

// dialEntry is a cached (or being dialled) connection to one address. Dials to
// the same address while it is being dialled wait for ready and share the result.
type dialEntry struct {
	ready chan struct{} // closed when the dial ended
	conn  *quic.Conn    // guarded by Transport.mu until ready is closed
	err   error         // likewise
}

// Dial opens a stream of the given kind to addr (host:port) and writes the kind
// byte. It reuses the cached connection to addr, and redials when that
// connection is closed or turns out dead when opening the stream. KindData
// streams use a second connection to the same address, so bulk data never
// holds up Raft and control traffic in a shared flow-control window.
//
// A connection that looks alive may still be stale (the peer restarted and has
// not answered yet); the first stream operation on it then fails, the
// connection is dropped from the cache, and the next Dial redials.
//
// Under a context from WithPrivateConn, the stream goes over that
// context's own connection instead (privateconn.go).
func (t *Transport) Dial(ctx context.Context, addr string, kind StreamKind) (*Stream, error) {
	if pc := privateConnOf(ctx); pc != nil {
		return t.dialPrivate(ctx, pc, addr, kind)
	}
	for attempt := 0; ; attempt++ {
		key := t.keyForDial(addr, kind)
		c, fresh, err := t.conn(ctx, key)
		if err != nil {
			return nil, err
		}
		qs, err := c.OpenStreamSync(ctx)
		if err != nil {
			if ctx.Err() != nil && c.Context().Err() == nil && !isConnErr(err) {
				// The caller gave up waiting (for the peer to allow another
				// stream, say): the connection is fine, and other callers'
				// streams on it must not be cut.
				return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
			}
			t.forget(key, c)
			if ctx.Err() != nil || fresh || attempt > 0 {
				return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
			}
			continue // the cached connection died: redial once
		}
		s := newStream(t, c, qs, key)
		if dl, ok := ctx.Deadline(); ok {
			_ = qs.SetWriteDeadline(dl)
		}
		_, err = s.Write([]byte{byte(kind)})
		_ = qs.SetWriteDeadline(time.Time{})
		if err != nil {
			s.Close()
			if ctx.Err() != nil || fresh || attempt > 0 {
				return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
			}
			continue
		}
		return s, nil
	}
}

// conn returns a live connection for key, dialling (once, shared by concurrent
// callers) when none is cached. fresh reports that this call dialled it.
func (t *Transport) conn(ctx context.Context, key connKey) (c *quic.Conn, fresh bool, err error) {
	addr := key.addr
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false, fmt.Errorf("transport: dial %s: %w", addr, net.ErrClosed)
	}
	e, ok := t.dialed[key]
	if ok {
		select {
		case <-e.ready:
			if e.conn != nil && e.conn.Context().Err() == nil {
				t.mu.Unlock()
				return e.conn, false, nil
			}
			ok = false // dead or failed: replace
		default:
		}
	}
	if ok { // a dial is in flight: wait for it
		t.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("transport: dial %s: %w", addr, ctx.Err())
		}
		if e.err != nil {
			return nil, false, e.err
		}
		return e.conn, false, nil
	}
	e = &dialEntry{ready: make(chan struct{})}
	t.dialed[key] = e
	t.mu.Unlock()

	// e is in t.dialed, where forget reads e.conn under t.mu while the dial
	// is in flight: its fields are written under t.mu too.
	conn, derr := t.dial(ctx, addr)
	t.mu.Lock()
	e.conn, e.err = conn, derr
	if e.err != nil && t.dialed[key] == e {
		delete(t.dialed, key)
	}
	if e.err == nil && t.closed {
		_ = e.conn.CloseWithError(codeClosed, "transport closed")
		e.conn, e.err = nil, fmt.Errorf("transport: dial %s: %w", addr, net.ErrClosed)
	}
	close(e.ready)
	t.mu.Unlock()
	return e.conn, true, e.err
}

func (t *Transport) dial(ctx context.Context, addr string) (*quic.Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel) // Close aborts dials
	defer stop()
	c, err := t.qt.Dial(ctx, ua, t.clientTLS, t.dialConf)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	t.log.Debug("connected", "peer", addr)
	return c, nil
}

// forget drops c from the cache if it is still the entry for key, and closes it.
func (t *Transport) forget(key connKey, c *quic.Conn) {
	if key.addr == "" {
		return
	}
	t.mu.Lock()
	if e, ok := t.dialed[key]; ok && e.conn == c {
		delete(t.dialed, key)
	}
	t.mu.Unlock()
	_ = c.CloseWithError(codeClosed, "dropped")
}
