package raftnode

import (
	"context"
	"net"
	"time"

	"github.com/feedmesh/feedmesh/transport"
	"github.com/hashicorp/raft"
)

// streamLayer adapts a node's QUIC transport to raft.StreamLayer: accepted
// and dialled transport.KindRaft streams are the net.Conns of raft's
// NetworkTransport, so one UDP port carries Raft beside control and data.
// It lives here, not in transport, so that transport (which the client
// links) carries no Raft.
type streamLayer struct {
	t *transport.Transport
	net.Listener
	advertise net.Addr
	allow     func(net.Conn) error
}

// StreamLayer returns a raft.StreamLayer over t's KindRaft streams, for
// raft.NewNetworkTransport. Its Addr is advertise, which peers must be able
// to dial (t.Addr() for a transport bound to a concrete IP). Closing the
// layer closes the KindRaft listener.
//
// allow, if not nil, decides whether an accepted stream may speak Raft:
// hashicorp/raft trusts every stream it is handed (it checks neither the
// sender against its configuration nor any identity), so a stream that
// allow refuses is closed before Raft reads a byte of it.
func StreamLayer(t *transport.Transport, advertise net.Addr, allow func(net.Conn) error) raft.StreamLayer {
	return &streamLayer{t: t, Listener: t.Listener(transport.KindRaft), advertise: advertise, allow: allow}
}

// Accept returns the next stream that allow lets speak Raft; the others
// are closed.
func (r *streamLayer) Accept() (net.Conn, error) {
	for {
		c, err := r.Listener.Accept()
		if err != nil || r.allow == nil {
			return c, err
		}
		if err := r.allow(c); err != nil {
			c.Close()
			continue
		}
		return c, nil
	}
}

// Addr returns the advertised address.
func (r *streamLayer) Addr() net.Addr { return r.advertise }

// Dial opens a KindRaft stream to address within timeout.
func (r *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	s, err := r.t.Dial(ctx, string(address), transport.KindRaft)
	if err != nil {
		return nil, err
	}
	return s, nil
}
