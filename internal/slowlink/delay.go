package slowlink

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DelayFunc gives the one-way delay of the next datagram: base, spread
// uniformly by ±jitter (never below 0).
type DelayFunc func() (base, jitter time.Duration)

// Delay is a PacketConn whose receive side holds each datagram for a
// delay with jitter before handing it over, as a link between hosts of a
// LAN or between racks does (where the kernel has no netem qdisc to add it
// on the interface). Like Link, a goroutine takes each datagram off the
// socket as it arrives and stamps it with the time it may be read; the
// order of arrival is kept (a datagram is never handed over before one
// that arrived earlier), so jitter adds delay but does not reorder. The
// delay is asked of the DelayFunc for each datagram, so a test changes it
// while the process runs. At most maxDelayed datagrams wait; more are
// dropped, as a full router queue drops them.
type Delay struct {
	net.PacketConn
	delay DelayFunc

	q    chan datagram
	done chan struct{}
	err  error

	dropped   atomic.Int64
	closeOnce sync.Once
}

const maxDelayed = 16384

// NewDelay starts the delay in front of pc's receive side.
func NewDelay(pc net.PacketConn, delay DelayFunc) *Delay {
	d := &Delay{PacketConn: pc, delay: delay, q: make(chan datagram, maxDelayed), done: make(chan struct{})}
	go d.run()
	return d
}

// At is when a datagram arriving now may be read, given the one before it
// may be read at last: now + base ± jitter, not before last.
func At(now, last time.Time, base, jitter time.Duration) time.Time {
	if jitter > 0 {
		base += time.Duration(rand.Int64N(int64(2*jitter)+1)) - jitter
	}
	at := now.Add(max(base, 0))
	if at.Before(last) {
		at = last
	}
	return at
}

func (d *Delay) run() {
	defer close(d.done)
	var last time.Time
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := d.PacketConn.ReadFrom(buf)
		if err != nil {
			d.err = err
			return
		}
		base, jitter := d.delay()
		at := At(time.Now(), last, base, jitter)
		select {
		case d.q <- datagram{b: append([]byte(nil), buf[:n]...), addr: addr, at: at}:
			last = at
		default:
			d.dropped.Add(1)
		}
	}
}

func (d *Delay) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case g := <-d.q:
		if wait := time.Until(g.at); wait > 0 {
			time.Sleep(wait) // the link's delay: pacing, not waiting for a condition
		}
		return copy(b, g.b), g.addr, nil
	case <-d.done:
		return 0, nil, d.err
	}
}

// Dropped counts the datagrams dropped because too many waited.
func (d *Delay) Dropped() int64 { return d.dropped.Load() }

// Close closes the socket and waits for the delay's goroutine.
func (d *Delay) Close() error {
	var err error
	d.closeOnce.Do(func() { err = d.PacketConn.Close() })
	<-d.done
	return err
}

// SetReadBuffer and SetWriteBuffer reach the socket's, so that quic-go
// sizes its buffers as on an unwrapped socket.
func (d *Delay) SetReadBuffer(n int) error {
	if s, ok := d.PacketConn.(interface{ SetReadBuffer(int) error }); ok {
		return s.SetReadBuffer(n)
	}
	return nil
}

func (d *Delay) SetWriteBuffer(n int) error {
	if s, ok := d.PacketConn.(interface{ SetWriteBuffer(int) error }); ok {
		return s.SetWriteBuffer(n)
	}
	return nil
}
