package transport

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// raftLayer adapts the transport to raft.StreamLayer: accepted and dialled
// KindRaft streams are the net.Conns of raft's NetworkTransport.
type raftLayer struct {
	t *Transport
	net.Listener
	advertise net.Addr
}

// RaftLayer returns a raft.StreamLayer over KindRaft streams, for
// raft.NewNetworkTransport. Its Addr is the transport's UDP address, which must
// be dialable by peers (bind a concrete IP, not 0.0.0.0). Closing the layer
// closes the KindRaft listener.
func (t *Transport) RaftLayer() raft.StreamLayer {
	return t.RaftLayerAdvertise(t.Addr())
}

// RaftLayerAdvertise is RaftLayer with Addr returning advertise, for a
// transport bound to a wildcard address.
func (t *Transport) RaftLayerAdvertise(advertise net.Addr) raft.StreamLayer {
	return &raftLayer{t: t, Listener: t.Listener(KindRaft), advertise: advertise}
}

// Addr returns the advertised address.
func (r *raftLayer) Addr() net.Addr { return r.advertise }

// Dial opens a KindRaft stream to address within timeout.
func (r *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	s, err := r.t.Dial(ctx, string(address), KindRaft)
	if err != nil {
		return nil, err
	}
	return s, nil
}
