//go:build linux

package transport

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel lays it out.
func cmsg(level, typ int32, body []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(body)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(body)))
	copy(b[unix.CmsgLen(0):], body)
	return b
}

func groCmsg(seg int) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(seg))
	return cmsg(unix.SOL_UDP, unix.UDP_GRO, b[:])
}

func tosCmsg(tos byte) []byte { return cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{tos}) }

func TestSplitGROCmsg(t *testing.T) {
	tos := tosCmsg(2)
	pkt := cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, make([]byte, 12))
	cases := []struct {
		name    string
		oob     []byte
		seg     int
		keptOOB []byte
	}{
		{"none", nil, 0, nil},
		{"only GRO", groCmsg(1452), 1452, nil},
		{"GRO between others", bytes.Join([][]byte{tos, groCmsg(1200), pkt}, nil), 1200, bytes.Join([][]byte{tos, pkt}, nil)},
		{"no GRO", bytes.Join([][]byte{tos, pkt}, nil), 0, bytes.Join([][]byte{tos, pkt}, nil)},
		{"truncated after TOS", append(append([]byte{}, tos...), 1, 2, 3), 0, tos},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seg, rest := splitGROCmsg(append([]byte{}, c.oob...))
			if seg != c.seg || !bytes.Equal(rest, c.keptOOB) {
				t.Fatalf("got seg %d oob %x, want %d %x", seg, rest, c.seg, c.keptOOB)
			}
		})
	}
}

// fakeBatches hands out prepared coalesced reads, then io.EOF.
type fakeBatches struct {
	reads [][]ipv4.Message
}

func (f *fakeBatches) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	if len(f.reads) == 0 {
		return 0, io.EOF
	}
	r := f.reads[0]
	f.reads = f.reads[1:]
	n := 0
	for i := range r {
		if i == len(ms) {
			break
		}
		ms[i].N = copy(ms[i].Buffers[0], r[i].Buffers[0])
		ms[i].NN = copy(ms[i].OOB, r[i].OOB)
		ms[i].Addr = r[i].Addr
		n++
	}
	return n, nil
}

// quicBuffers are ReadBatch messages as quic-go prepares them: 8 packet
// buffers of 1452 bytes and 128 bytes of control messages each.
func quicBuffers(n, size, oob int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, size)}
		ms[i].OOB = make([]byte, oob)
	}
	return ms
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestGROConnSplitsAcrossCalls(t *testing.T) {
	addr := &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9}
	coalesced := pattern(10*1452-300, 1) // 9 full segments and a short tail
	single := pattern(500, 2)
	tos := tosCmsg(1)
	src := &fakeBatches{reads: [][]ipv4.Message{{
		{Buffers: [][]byte{coalesced}, OOB: append(append([]byte{}, tos...), groCmsg(1452)...), Addr: addr},
		{Buffers: [][]byte{single}, OOB: tos, Addr: addr},
	}}}
	c := newGROConnOn(nil, src, 4)
	var got [][]byte
	var calls int
	for {
		ms := quicBuffers(8, 1452, 128)
		n, err := c.ReadBatch(ms, 0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if n == 0 || n > len(ms) {
			t.Fatalf("ReadBatch returned %d messages", n)
		}
		for _, m := range ms[:n] {
			if m.Addr != addr {
				t.Fatalf("address %v, want %v", m.Addr, addr)
			}
			if !bytes.Equal(m.OOB[:m.NN], tos) {
				t.Fatalf("control messages %x, want the TOS one only %x", m.OOB[:m.NN], tos)
			}
			got = append(got, append([]byte{}, m.Buffers[0][:m.N]...))
		}
	}
	if calls != 2 || len(got) != 11 {
		t.Fatalf("%d calls gave %d packets, want 2 calls (8 + 3) and 11 packets", calls, len(got))
	}
	for i := range 10 {
		want := coalesced[i*1452 : min((i+1)*1452, len(coalesced))]
		if !bytes.Equal(got[i], want) {
			t.Fatalf("packet %d: %d bytes, differs from segment %d (%d bytes)", i, len(got[i]), i, len(want))
		}
	}
	if !bytes.Equal(got[10], single) {
		t.Fatal("the uncoalesced datagram was not passed through whole")
	}
	if reads, segs := c.groStats(); reads != 1 || segs != 11 {
		t.Fatalf("stats: %d reads, %d segments; want 1, 11", reads, segs)
	}
}

func TestGROConnShortBuffers(t *testing.T) {
	addr := &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9}
	big := make([]byte, 200) // larger than quic-go's OOB buffer
	src := &fakeBatches{reads: [][]ipv4.Message{{
		{Buffers: [][]byte{pattern(3000, 3)}, OOB: append(cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, big), groCmsg(1500)...), Addr: addr},
	}}}
	c := newGROConnOn(nil, src, 1)
	ms := quicBuffers(8, 1000, 128)
	n, err := c.ReadBatch(ms, 0)
	if err != nil || n != 2 {
		t.Fatalf("ReadBatch: %d, %v; want 2 packets", n, err)
	}
	for _, m := range ms[:n] {
		if m.N != 1000 || m.NN != 0 {
			t.Fatalf("packet of %d bytes with %d control bytes; want truncated to 1000, control messages that do not fit dropped", m.N, m.NN)
		}
	}
}

// TestGROReceivesCoalescedDatagram sends one GSO datagram of 20 segments
// between real sockets and reads it back through a groConn.
func TestGROReceivesCoalescedDatagram(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	pc := wrapGRO(rx, 4)
	c, ok := pc.(*groConn)
	if !ok {
		t.Skip("kernel refused UDP_GRO")
	}
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	const seg, nseg = 1200, 20
	payload := pattern(seg*nseg-77, 5)
	var segBody [2]byte
	binary.NativeEndian.PutUint16(segBody[:], seg)
	if _, _, err := tx.WriteMsgUDP(payload, cmsg(unix.SOL_UDP, unix.UDP_SEGMENT, segBody[:]), rx.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Skipf("kernel refused a GSO send: %v", err)
	}
	if err := rx.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	packets := 0
	for packets < nseg {
		ms := quicBuffers(8, 1452, 128)
		n, err := c.ReadBatch(ms, 0)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("after %d packets: %v", packets, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[:n] {
			if m.N != seg && packets != nseg-1 {
				t.Fatalf("packet %d has %d bytes, want %d", packets, m.N, seg)
			}
			got = append(got, m.Buffers[0][:m.N]...)
			packets++
		}
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("reassembled packets differ from what was sent")
	}
	if reads, _ := c.groStats(); reads != 1 {
		t.Fatalf("%d reads for one GSO datagram on loopback; want 1 (coalesced)", reads)
	}
}

// TestTransportStreamOverGRO moves 8 MiB on a data stream between two
// transports with GRO on and checks it arrives intact, mostly coalesced,
// and that GROBuffers 0 leaves the socket to quic-go.
func TestTransportStreamOverGRO(t *testing.T) {
	cfg := FastConfig()
	a := startNode(t, nodeOpts{noRPC: true, cfg: &cfg})
	b := startNode(t, nodeOpts{noRPC: true, cfg: &cfg})
	rc, ok := b.t.qt.Conn.(*groConn)
	if !ok {
		t.Skip("kernel refused UDP_GRO")
	}
	payload := pattern(8<<20, 9)
	s, err := a.t.Dial(testutil.Ctx(t, 5*time.Second), b.addr(), KindData)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	werr := make(chan error, 1)
	go func() {
		_, err := s.Write(payload)
		if err == nil {
			err = s.CloseWrite()
		}
		werr <- err
	}()
	srv := acceptT(t, b.t.Listener(KindData))
	defer srv.Close()
	if err := srv.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, srv)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", n, err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(payload)
	if n != int64(len(payload)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("received %d bytes, hash differs or length wrong (want %d)", n, len(payload))
	}
	reads, segs := rc.groStats()
	t.Logf("receiver: %d reads brought %d packets (%.1f per system call)", reads, segs, float64(segs)/float64(reads))
	if segs < int64(len(payload))/1452 || segs < 3*reads {
		t.Fatalf("%d reads brought %d packets: GRO did not coalesce (want ≥ 3 per read)", reads, segs)
	}

	off := FastConfig()
	off.GROBuffers = 0
	c := startNode(t, nodeOpts{noRPC: true, cfg: &off})
	if _, ok := c.t.qt.Conn.(*groConn); ok {
		t.Fatal("GROBuffers 0 still wrapped the socket")
	}
}

// FuzzSplitGROCmsg: whatever the control-message bytes, the parse neither
// panics nor keeps more than it was given.
func FuzzSplitGROCmsg(f *testing.F) {
	f.Add(bytes.Join([][]byte{tosCmsg(2), groCmsg(1452)}, nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, oob []byte) {
		n := len(oob)
		seg, rest := splitGROCmsg(oob)
		if len(rest) > n || (seg != 0 && len(rest) >= n) { // the GRO message, when found, is dropped
			t.Fatalf("kept %d of %d bytes with segment %d", len(rest), n, seg)
		}
	})
}
