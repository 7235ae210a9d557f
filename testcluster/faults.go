package testcluster

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
)

// errPartitioned is what a dial across a partition returns.
var errPartitioned = errors.New("testcluster: partitioned")

// The fault network: every node's UDP socket (QUIC) and gossip transport
// are wrapped so that traffic across a partition, or to and from an
// isolated node, is dropped. The wrapper is a plain net.PacketConn, which
// hides QUIC's fast paths (GSO, batched I/O): benchmarks run
// localcluster without it.

// faultNet decides which node may talk to which. Addresses (gossip and
// QUIC) map to node indexes; a packet or dial between two nodes in
// different partition groups is dropped. Unknown addresses (clients, CLI
// tools) are blocked only to and from an isolated node.
type faultNet struct {
	mu       sync.RWMutex
	addrs    map[string]int
	groupOf  map[int]int  // nil: no partition
	isolated map[int]bool // cut off from every address, clients included
}

func newFaultNet() *faultNet { return &faultNet{addrs: map[string]int{}} }

// options install the network on every node a cluster starts.
func (f *faultNet) options() []localcluster.Option {
	return []localcluster.Option{
		localcluster.WithConfig(func(i int, cfg *mesh.Config) {
			cfg.WrapPacketConn = func(pc net.PacketConn) net.PacketConn { return &packetConn{PacketConn: pc, f: f, self: i} }
			cfg.WrapGossipTransport = func(t memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
				return &gossipTransport{NodeAwareTransport: t, f: f, self: i}
			}
		}),
		localcluster.WithStarted(func(i int, n *mesh.Node) {
			f.register(n.GossipAddr(), i)
			f.register(n.Addr(), i)
		}),
	}
}

// Partition splits the cluster: nodes in the same group reach each other,
// nothing crosses between groups. Nodes in no group form one more group.
func (c *Cluster) Partition(groups ...[]int) {
	g := map[int]int{}
	for gi, grp := range groups {
		for _, i := range grp {
			g[i] = gi + 1
		}
	}
	c.net.partition(g) // absent indexes read as group 0
}

// Isolate cuts node i off from every address, other nodes and clients
// alike, as a paused process (SIGSTOP) is cut off: its goroutines run on,
// but nothing it sends arrives and nothing sent to it reaches it, until
// Heal.
func (c *Cluster) Isolate(i int) { c.net.isolate(i) }

// Heal removes every partition and isolation.
func (c *Cluster) Heal() { c.net.heal() }

func (f *faultNet) isolate(idx int) {
	f.mu.Lock()
	if f.isolated == nil {
		f.isolated = map[int]bool{}
	}
	f.isolated[idx] = true
	f.mu.Unlock()
}

func (f *faultNet) register(addr string, idx int) {
	f.mu.Lock()
	f.addrs[addr] = idx
	f.mu.Unlock()
}

func (f *faultNet) partition(groupOf map[int]int) {
	f.mu.Lock()
	f.groupOf = groupOf
	f.mu.Unlock()
}

// heal ends every partition and isolation.
func (f *faultNet) heal() {
	f.mu.Lock()
	f.groupOf, f.isolated = nil, nil
	f.mu.Unlock()
}

func (f *faultNet) blocked(from int, to string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	idx, ok := f.addrs[to]
	if ok && idx == from {
		return false
	}
	if f.isolated[from] || (ok && f.isolated[idx]) {
		return true
	}
	if f.groupOf == nil || !ok {
		return false
	}
	return f.groupOf[from] != f.groupOf[idx]
}

// packetConn drops QUIC datagrams to and from nodes across a partition,
// and every datagram of an isolated node.
type packetConn struct {
	net.PacketConn
	f    *faultNet
	self int
}

func (c *packetConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.f.blocked(c.self, addr.String()) {
		return len(b), nil // lost on the wire
	}
	return c.PacketConn.WriteTo(b, addr)
}

func (c *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, addr, err := c.PacketConn.ReadFrom(b)
		if err != nil || !c.f.blocked(c.self, addr.String()) {
			return n, addr, err
		}
	}
}

// gossipTransport drops memberlist packets and refuses its TCP dials across
// a partition. Both sides filter what they send, so nothing crosses.
type gossipTransport struct {
	memberlist.NodeAwareTransport
	f    *faultNet
	self int
}

func (g *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if g.f.blocked(g.self, addr) {
		return time.Now(), nil
	}
	return g.NodeAwareTransport.WriteTo(b, addr)
}

func (g *gossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if g.f.blocked(g.self, a.Addr) {
		return time.Now(), nil
	}
	return g.NodeAwareTransport.WriteToAddress(b, a)
}

func (g *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if g.f.blocked(g.self, addr) {
		return nil, errPartitioned
	}
	return g.NodeAwareTransport.DialTimeout(addr, timeout)
}

func (g *gossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if g.f.blocked(g.self, a.Addr) {
		return nil, errPartitioned
	}
	return g.NodeAwareTransport.DialAddressTimeout(a, timeout)
}

// SetReadBuffer and SetWriteBuffer pass through to the UDP socket so quic-go
// gets the buffers it asks for, as it would without the wrapper.
func (c *packetConn) SetReadBuffer(n int) error {
	if s, ok := c.PacketConn.(interface{ SetReadBuffer(int) error }); ok {
		return s.SetReadBuffer(n)
	}
	return nil
}

// SetWriteBuffer: see SetReadBuffer.
func (c *packetConn) SetWriteBuffer(n int) error {
	if s, ok := c.PacketConn.(interface{ SetWriteBuffer(int) error }); ok {
		return s.SetWriteBuffer(n)
	}
	return nil
}
