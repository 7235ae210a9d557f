// Package slowlink emulates a slow link into one host, for benchmarks
// and tests of what crosses it (the offload benchmark's slow-link
// scenario, client tests of offload auto behind a slow link).
package slowlink

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Link is a PacketConn whose receive side is a bottleneck link of
// bytesPerSecond with a drop-tail queue of queueBytes, as a router's: a
// goroutine takes each datagram off the socket as it arrives and gives it
// the time the link would finish carrying it (after those queued before
// it); a datagram that would wait behind more than queueBytes is dropped.
// ReadFrom hands datagrams over at those times. QUIC's congestion control
// then settles at the link's rate, and a small request's answer waits
// behind at most queueBytes of data, as on a real link (the socket's own
// buffer, which quic-go makes megabytes large, would hold seconds).
// Sending is not slowed (the client sends acknowledgements and small
// requests). The offload benchmark's slow-link scenario gives it to the
// client (client.Options.PacketConn), so only what reaches the trainer's
// host crosses the slow link; the nodes talk among themselves at loopback
// speed.
type Link struct {
	net.PacketConn
	bytesPerSecond float64
	queueBytes     float64

	q    chan datagram
	done chan struct{} // closed when the reading goroutine has returned
	err  error         // the socket's read error, once done is closed

	dropped   atomic.Int64 // datagrams dropped: the queue was full
	closeOnce sync.Once
}

type datagram struct {
	b    []byte
	addr net.Addr
	at   time.Time // when the link has carried it
}

// maxQueued bounds the datagrams queued (the byte bound is the
// link's; this one only keeps tiny datagrams from growing the channel).
const maxQueued = 4096

// New starts the link in front of pc's receive side.
func New(pc net.PacketConn, bytesPerSecond, queueBytes float64) *Link {
	s := &Link{PacketConn: pc, bytesPerSecond: bytesPerSecond, queueBytes: queueBytes,
		q: make(chan datagram, maxQueued), done: make(chan struct{})}
	go s.run()
	return s
}

// run is the link: it owns reading the socket until the socket is closed.
func (s *Link) run() {
	defer close(s.done)
	var free time.Time // when the link has carried everything queued
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := s.PacketConn.ReadFrom(buf)
		if err != nil {
			s.err = err
			return
		}
		now := time.Now()
		start := free
		if start.Before(now) {
			start = now
		}
		if start.Sub(now).Seconds()*s.bytesPerSecond > s.queueBytes {
			s.dropped.Add(1) // the queue is full
			continue
		}
		d := datagram{b: append([]byte(nil), buf[:n]...), addr: addr, at: start.Add(time.Duration(float64(n) / s.bytesPerSecond * float64(time.Second)))}
		select {
		case s.q <- d:
			free = d.at
		default: // too many tiny datagrams queued
			s.dropped.Add(1)
		}
	}
}

func (s *Link) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case d := <-s.q:
		if wait := time.Until(d.at); wait > 0 {
			time.Sleep(wait) // the link's transmission time: pacing, not waiting for a condition
		}
		return copy(b, d.b), d.addr, nil
	case <-s.done:
		return 0, nil, s.err
	}
}

// Close closes the socket and waits for the link's goroutine.
func (s *Link) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.PacketConn.Close() })
	<-s.done
	return err
}
