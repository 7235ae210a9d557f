package transport

import (
	"io"
	"net"
	"time"
)

// Limits against hostile peers: what one connection and one remote address
// may hold of the node's control plane. Counters live in the Transport (it
// sees connections and addresses); the RPCServer consults them through the
// streams it accepts.

// rpcFreeBytes is how much of a request body an RPCServer reads without
// taking from the byte budgets: the first buffer of every request. Control
// requests are small, so a member's request never waits for budget a stranger
// holds; MaxConcurrentRPCs × rpcFreeBytes bounds what this adds.
const rpcFreeBytes = 64 << 10

// connState is the accounting of one incoming connection.
type connState struct {
	addr       *addrState
	rpcStreams int         // control streams routed and not closed; guarded by Transport.mu
	budget     *ByteBudget // request bytes in flight on this connection
}

// addrState is the accounting of one remote IP address.
type addrState struct {
	ip         string
	conns      int // guarded by Transport.mu
	rpcStreams int // guarded by Transport.mu
	// dataStreams: data streams routed and not closed; guarded by Transport.mu
	dataStreams int
}

// remoteIP is the address limits are counted by: the IP without the port (a
// peer picks ports freely).
func remoteIP(a net.Addr) string {
	if ua, ok := a.(*net.UDPAddr); ok {
		return ua.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// idleReader reads from a stream with a deadline that moves with progress: a
// read must return within idle, and all reads end by final.
type idleReader struct {
	c     net.Conn
	idle  time.Duration
	final time.Time
}

func (r *idleReader) Read(p []byte) (int, error) {
	dl := r.final
	if r.idle > 0 {
		if d := time.Now().Add(r.idle); d.Before(dl) {
			dl = d
		}
	}
	_ = r.c.SetReadDeadline(dl)
	return r.c.Read(p)
}

// deadline is when the current wait (for bytes or budget) must end.
func (r *idleReader) deadline() time.Time {
	dl := r.final
	if r.idle > 0 {
		if d := time.Now().Add(r.idle); d.Before(dl) {
			dl = d
		}
	}
	return dl
}

var _ io.Reader = (*idleReader)(nil)

// connStateBytes is what quic-go keeps per open connection, measured:
// 512 idle connections on loopback grew the heap by 89 KiB each, both ends
// together (quic-go v0.65, 2026-11-28).
const connStateBytes = 48 << 10

// PeerMemoryBound is what peers can make a transport with this config hold,
// by the limits above, whatever they send: the connections' own state
// (connStateBytes each, measured), unread QUIC data (each connection's
// initial window, and the window growth budget, together) and control
// requests (the byte budget, each request's free first buffer and its
// header).
func (c Config) PeerMemoryBound() int64 {
	conns := int64(c.MaxIncomingConns) * connStateBytes
	unread := int64(c.MaxIncomingConns)*int64(c.InitialReceiveWindow) + c.MaxReceiveWindowBytes
	control := c.MaxRPCBytesInFlight + int64(c.MaxConcurrentRPCs)*(rpcFreeBytes+int64(c.MaxHeaderBytes))
	return conns + unread + control
}
