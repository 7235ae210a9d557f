package mesh

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipStats counts this node's gossip traffic since it started, for the
// cost model (docs/operating/scale.md). Packets are the UDP messages it
// sent (probes, acks, gossip: memberlist packs several messages into one
// compound packet); streams are the TCP connections it opened (push/pull
// state exchanges, joins, TCP fallback probes) and their bytes in both
// directions. What a node receives is another's sent packets or streams,
// so a cluster's traffic is the sum of its nodes' counts.
type GossipStats struct {
	PacketsSent uint64 `json:"packets_sent"`
	PacketBytes uint64 `json:"packet_bytes"`
	Streams     uint64 `json:"streams"`
	StreamBytes uint64 `json:"stream_bytes"`
}

// GossipStats returns the node's gossip counters.
func (n *Node) GossipStats() GossipStats {
	c := &n.gossipCount
	return GossipStats{PacketsSent: c.packets.Load(), PacketBytes: c.packetBytes.Load(),
		Streams: c.streams.Load(), StreamBytes: c.streamBytes.Load()}
}

type gossipCounters struct {
	packets, packetBytes, streams, streamBytes atomic.Uint64
}

// countingTransport counts what memberlist sends through its transport.
type countingTransport struct {
	memberlist.NodeAwareTransport
	c *gossipCounters
}

func (t countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.c.packets.Add(1)
	t.c.packetBytes.Add(uint64(len(b)))
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t countingTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	t.c.packets.Add(1)
	t.c.packetBytes.Add(uint64(len(b)))
	return t.NodeAwareTransport.WriteToAddress(b, addr)
}

func (t countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := t.NodeAwareTransport.DialTimeout(addr, timeout)
	return t.counted(conn, err)
}

func (t countingTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
	return t.counted(conn, err)
}

func (t countingTransport) counted(conn net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return conn, err
	}
	t.c.streams.Add(1)
	return countingConn{Conn: conn, c: t.c}, nil
}

// countingConn counts a dialled stream's bytes, read and written.
type countingConn struct {
	net.Conn
	c *gossipCounters
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.c.streamBytes.Add(uint64(max(k, 0)))
	return k, err
}

func (c countingConn) Write(p []byte) (int, error) {
	k, err := c.Conn.Write(p)
	c.c.streamBytes.Add(uint64(max(k, 0)))
	return k, err
}

// RPCCalls returns how many control requests this node has served, by
// method (api/methods.go), since it started: forwarded ones on the leader
// count there too, so on the leader it is the control plane's fan-in.
func (n *Node) RPCCalls() map[string]uint64 { return n.rpc.Calls() }
