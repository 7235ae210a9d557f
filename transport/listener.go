package transport

import (
	"fmt"
	"net"
	"sync"
)

// kindListener is the net.Listener of one stream kind. Routed streams wait in a
// channel bounded by Config.AcceptBacklog.
type kindListener struct {
	t       *Transport
	kind    StreamKind
	backlog chan *Stream

	mu     sync.Mutex // guards closed against offer racing close
	closed bool
	done   chan struct{}
}

func newKindListener(t *Transport, kind StreamKind) *kindListener {
	return &kindListener{
		t:       t,
		kind:    kind,
		backlog: make(chan *Stream, t.cfg.AcceptBacklog),
		done:    make(chan struct{}),
	}
}

// offer queues s without blocking; false means the caller must reset it.
func (l *kindListener) offer(s *Stream) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.backlog <- s:
		return true
	default:
		return false
	}
}

// Accept waits for the next stream of this kind; it returns a *Stream.
func (l *kindListener) Accept() (net.Conn, error) {
	select {
	case s := <-l.backlog:
		return s, nil
	case <-l.done:
	}
	// Closed: streams still queued are reset by drain.
	return nil, fmt.Errorf("transport: accept %s stream: %w", l.kind, net.ErrClosed)
}

// Close stops accepting streams of this kind and resets queued ones.
func (l *kindListener) Close() error {
	l.close()
	l.drain()
	return nil
}

func (l *kindListener) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
}

// drain resets streams left in the backlog of a closed listener.
func (l *kindListener) drain() {
	for {
		select {
		case s := <-l.backlog:
			resetStream(s.qs, codeRejected)
		default:
			return
		}
	}
}

// Addr returns the transport's UDP address.
func (l *kindListener) Addr() net.Addr { return l.t.Addr() }
