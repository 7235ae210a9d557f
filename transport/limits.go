package transport

import (
	"fmt"
	"io"
	"net"
	"sync"
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
	budget     *byteBudget // request bytes in flight on this connection
}

// addrState is the accounting of one remote IP address.
type addrState struct {
	ip         string
	conns      int // guarded by Transport.mu
	rpcStreams int // guarded by Transport.mu
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

// byteBudget is a counting semaphore of bytes.
type byteBudget struct {
	name string // the Config field, for errors
	mu   sync.Mutex
	size int64
	free int64
	wake chan struct{} // closed and replaced on every release
}

func newByteBudget(name string, size int64) *byteBudget {
	return &byteBudget{name: name, size: size, free: size, wake: make(chan struct{})}
}

// errBudget reports a request refused because a byte budget stayed exhausted.
type errBudget struct {
	name string
	size int64
	n    int64
}

func (e *errBudget) Error() string {
	return fmt.Sprintf("node busy: %d more request bytes do not fit the %s budget of %d bytes in time; retry later", e.n, e.name, e.size)
}

// acquire takes n bytes, waiting until deadline at most.
func (b *byteBudget) acquire(n int64, deadline time.Time) error {
	if n > b.size {
		return &errBudget{b.name, b.size, n}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		d := time.Until(deadline)
		if d <= 0 {
			return &errBudget{b.name, b.size, n}
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-wake:
		case <-timer.C:
		}
	}
}

func (b *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// inUse returns the bytes taken.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.free
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
