package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// A private connection: the streams Dial opens under a context from
// WithPrivateConn go over a connection of their own, dialled on first use,
// never cached, and closed by the function WithPrivateConn returns. For a
// one-off exchange with a peer that this node may never speak to again
// (gossip admission checks every member once, mesh/admission.go): a
// cached connection would stay open, sending a keep-alive PING every
// KeepAlivePeriod, for as long as both nodes run. Every node admitting every
// other made n² such connections in a cluster of n nodes (about 10,000 at
// 100 nodes, 33,000 PINGs per second with FastConfig), which alone kept
// an in-process cluster of 100 nodes from forming in minutes.

type privateConnKey struct{}

// privateConn is the connection of one WithPrivateConn context.
type privateConn struct {
	mu     sync.Mutex
	addr   string
	conn   *quic.Conn
	closed bool
}

// WithPrivateConn returns ctx under which Dial (and Call) uses a
// connection of its own to one address, and the function that closes that
// connection (once the exchange is over; the streams on it end too).
// Dialling another address under the same context is an error.
func WithPrivateConn(ctx context.Context) (context.Context, func()) {
	pc := &privateConn{}
	return context.WithValue(ctx, privateConnKey{}, pc), pc.close
}

func privateConnOf(ctx context.Context) *privateConn {
	pc, _ := ctx.Value(privateConnKey{}).(*privateConn)
	return pc
}

// get returns the private connection to addr, dialling it the first time.
func (pc *privateConn) get(ctx context.Context, t *Transport, addr string) (*quic.Conn, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch {
	case pc.closed:
		return nil, fmt.Errorf("transport: dial %s: private connection closed", addr)
	case pc.conn != nil && pc.addr != addr:
		return nil, fmt.Errorf("transport: dial %s: the private connection of this context goes to %s", addr, pc.addr)
	case pc.conn != nil && pc.conn.Context().Err() == nil:
		return pc.conn, nil
	}
	c, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	pc.addr, pc.conn = addr, c
	return c, nil
}

func (pc *privateConn) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.closed = true
	if pc.conn != nil {
		_ = pc.conn.CloseWithError(codeClosed, "done")
	}
}

// dialPrivate opens a stream of kind on ctx's private connection to addr.
func (t *Transport) dialPrivate(ctx context.Context, pc *privateConn, addr string, kind StreamKind) (*Stream, error) {
	c, err := pc.get(ctx, t, addr)
	if err != nil {
		return nil, err
	}
	qs, err := c.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
	}
	s := newStream(t, c, qs, connKey{}) // zero key: not in the cache
	if dl, ok := ctx.Deadline(); ok {
		_ = qs.SetWriteDeadline(dl)
	}
	_, err = s.Write([]byte{byte(kind)})
	_ = qs.SetWriteDeadline(time.Time{})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
	}
	return s, nil
}
