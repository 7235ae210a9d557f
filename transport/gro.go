//go:build linux

package transport

import (
	"encoding/binary"
	"net"
	"sync/atomic"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// UDP generic receive offload (GRO) for quic-go.
//
// quic-go sends with GSO: one sendmsg carries up to 64 KiB of 1452-byte QUIC
// packets. Without GRO the kernel splits them again before the receiving
// socket, and quic-go reads them back 8 per recvmmsg (its batchSize), one
// 1452-byte buffer each: about 90 system calls per MiB and per-packet socket
// work in the kernel. With UDP_GRO set on the socket the kernel delivers the
// coalesced datagram whole, with the segment size in a control message; one
// recvmmsg of GROBuffers 64 KiB buffers then brings up to GROBuffers×44
// packets. groConn splits them into the 1452-byte packet buffers quic-go hands
// to ReadBatch, so quic-go itself is unchanged (it reads through ReadBatch when
// its PacketConn has one) and keeps its GSO, ECN and packet-info paths: the
// wrapper embeds the *net.UDPConn, so sending, SyscallConn and socket options
// go to the real socket.

// groBufferBytes is the size of one coalesced receive buffer: the largest UDP
// payload the kernel builds by GRO (and the largest datagram at all).
const groBufferBytes = 64 << 10

// batchReader is what groConn reads coalesced datagrams from: an
// *ipv4.PacketConn over the socket, or a fake in tests.
type batchReader interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
}

// groConn is a *net.UDPConn whose ReadBatch returns GRO-coalesced datagrams
// split into their packets. ReadBatch is called by quic-go's single read loop
// only; it is not safe for concurrent use (the counters are, for tests).
type groConn struct {
	*net.UDPConn
	src batchReader

	big []ipv4.Message // coalesced reads, GROBuffers of them
	n   int            // messages filled by the last read
	cur int            // message being split
	off int            // offset of the next segment in big[cur]
	seg int            // segment size of big[cur]; its length when not coalesced
	oob []byte         // control messages of big[cur] without the GRO one

	reads    atomic.Int64 // underlying ReadBatch calls that returned data
	segments atomic.Int64 // packets handed to quic-go
}

var _ batchReader = (*groConn)(nil)

func newGROConnOn(udp *net.UDPConn, src batchReader, buffers int) *groConn {
	c := &groConn{UDPConn: udp, src: src, big: make([]ipv4.Message, buffers)}
	for i := range c.big {
		c.big[i].Buffers = [][]byte{make([]byte, groBufferBytes)}
		c.big[i].OOB = make([]byte, 256)
	}
	return c
}

// ReadBatch fills ms with the next packets: the rest of the last coalesced
// read if any, else those of a new read (blocking until one arrives). Each
// packet is copied into ms[i].Buffers[0] (quic-go's packet buffer), with its
// datagram's address and control messages (ECN, packet info; the GRO segment
// size is dropped). A packet longer than its buffer is truncated, as the
// kernel truncates a datagram read into a short buffer.
func (c *groConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if c.cur >= c.n {
		n, err := c.src.ReadBatch(c.big, flags)
		if err != nil || n == 0 {
			return 0, err
		}
		c.reads.Add(1)
		c.n, c.cur = n, 0
		c.start()
	}
	out := 0
	for out < len(ms) && c.cur < c.n {
		m := &c.big[c.cur]
		data := m.Buffers[0][:m.N]
		end := min(c.off+c.seg, len(data))
		o := &ms[out]
		o.N = copy(o.Buffers[0], data[c.off:end])
		o.NN = 0
		if len(c.oob) <= len(o.OOB) {
			o.NN = copy(o.OOB, c.oob)
		}
		o.Addr = m.Addr
		o.Flags = m.Flags
		out++
		c.off = end
		if c.off >= len(data) {
			c.cur++
			if c.cur < c.n {
				c.start()
			}
		}
	}
	c.segments.Add(int64(out))
	return out, nil
}

// start prepares splitting big[cur]: its segment size and its control
// messages without the GRO one.
func (c *groConn) start() {
	m := &c.big[c.cur]
	c.off = 0
	c.seg, c.oob = splitGROCmsg(m.OOB[:m.NN])
	if c.seg <= 0 {
		c.seg = max(m.N, 1) // not coalesced: one packet
	}
}

// splitGROCmsg returns the GRO segment size found in the control messages oob
// (0 if none) and oob without that message, compacted in place. A malformed
// control message ends the parse; what was kept so far is returned.
func splitGROCmsg(oob []byte) (seg int, rest []byte) {
	out := oob[:0]
	for len(oob) >= unix.SizeofCmsghdr { // shorter: a torn header, not a message
		h, body, rem, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		msgLen := len(oob) - len(rem)
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO {
			switch len(body) {
			case 4:
				seg = int(int32(binary.NativeEndian.Uint32(body)))
			case 2:
				seg = int(binary.NativeEndian.Uint16(body))
			}
		} else {
			out = append(out, oob[:msgLen]...) // out is a prefix of oob: never overtakes it
		}
		oob = rem
	}
	return seg, out
}

// enableGRO sets UDP_GRO on the socket; false if the kernel refuses.
func enableGRO(udp *net.UDPConn) bool {
	rc, err := udp.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
	}); err != nil {
		return false
	}
	return serr == nil
}

// groStats reports underlying reads and packets delivered (tests).
func (c *groConn) groStats() (reads, segments int64) { return c.reads.Load(), c.segments.Load() }

// wrapGRO returns pc wrapped in a groConn when pc is a *net.UDPConn, buffers
// is positive and the kernel accepts UDP_GRO on the socket; otherwise pc.
func wrapGRO(pc net.PacketConn, buffers int) net.PacketConn {
	udp, ok := pc.(*net.UDPConn)
	if !ok || buffers <= 0 || !enableGRO(udp) {
		return pc
	}
	return newGROConnOn(udp, ipv4.NewPacketConn(udp), buffers)
}
