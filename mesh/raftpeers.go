package mesh

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/feedmesh/feedmesh/transport"
)

// raftPeer decides whether the peer of an accepted Raft stream may speak
// Raft to this node. hashicorp/raft trusts every stream it is handed, so
// this is the only gate: one forged AppendEntries from a stranger made a
// leader step down, and an entry injected into a follower split its state
// from the others' for good.
//
// Under mutual TLS the peer must hold a node certificate of the cluster
// (a trainer's client certificate may not speak Raft). Without it (dev
// mode on loopback, or --insecure with a gossip key) no peer proves who
// it is, so the peer must be a node this node knows, dialling from the
// QUIC address it advertises (a node dials from its one QUIC socket): a
// member of the gossip mesh (admitted: see admission.go). Raft itself
// runs among members only (formation and the voter planner take them from
// gossip), and a peer's Raft retries outlast gossip's rejoin after a
// restart.
func (n *Node) raftPeer(c net.Conn) error {
	if id, ok := transport.PeerIdentity(c); ok {
		if !id.IsNode() {
			n.log.Warn("raft stream refused: the peer is not a node", "peer", id.String(), "addr", c.RemoteAddr().String())
			return fmt.Errorf("raft stream from %s: %s is not a node", c.RemoteAddr(), id)
		}
		return nil
	}
	if n.isNodeAddr(c.RemoteAddr()) {
		return nil
	}
	n.log.Warn("raft stream refused: not from a known node's address", "addr", c.RemoteAddr().String())
	return fmt.Errorf("raft stream from %s: not a known node's address", c.RemoteAddr())
}

// isNodeAddr reports whether a is the QUIC address of a member of the
// mesh.
func (n *Node) isNodeAddr(a net.Addr) bool {
	want, ok := addrPort(a.String())
	if !ok {
		return false
	}
	for _, m := range n.members.snapshot() {
		if ap, ok := addrPort(m.Addr); ok && ap == want {
			return true
		}
	}
	return false
}

// addrPort parses host:port with a literal IP (IPv4 in IPv6 unmapped).
func addrPort(s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}
