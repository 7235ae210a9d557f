package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Stream is a bidirectional QUIC stream behaving as a net.Conn, so it can carry
// hashicorp/raft's NetworkTransport like a TCP connection:
//   - Close closes both directions: it sends FIN after the written data (the
//     peer reads io.EOF) and stops reading (the peer's writes fail), and later
//     Reads and Writes return net.ErrClosed;
//   - deadlines work as on TCP and time out with a net.Error whose Timeout is true;
//   - LocalAddr and RemoteAddr are the connection's.
//
// A stream operation failing because the whole connection died drops that
// connection from the transport's cache, so the next Dial redials.
type Stream struct {
	t      *Transport
	conn   *quic.Conn
	qs     *quic.Stream
	key    connKey // cache key of a dialled stream, zero for accepted ones
	closed atomic.Bool
	in     *connState // accounting of an accepted stream's connection, nil for dialled ones
	// release gives back what an accepted control stream counts against its
	// connection's and address's limits; Close calls it once.
	release func()

	// quic-go forbids SendStream.Close concurrent with Write, but net.Conn
	// users (raft's pipelines) close a conn to unblock a writer: Close resets
	// the send side instead when a Write is in progress.
	wmu     sync.Mutex
	writing bool
}

var _ net.Conn = (*Stream)(nil)

func newStream(t *Transport, c *quic.Conn, qs *quic.Stream, key connKey) *Stream {
	return &Stream{t: t, conn: c, qs: qs, key: key}
}

// Quic returns the underlying quic-go stream, for the data plane (priorities,
// CancelWrite with a code, context).
func (s *Stream) Quic() *quic.Stream { return s.qs }

// Read reads from the stream; io.EOF after the peer closed its side.
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.qs.Read(p)
	if err != nil {
		err = s.opErr("read", err)
	}
	return n, err
}

// Write writes to the stream. A concurrent Close makes it return net.ErrClosed.
func (s *Stream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	if s.closed.Load() {
		s.wmu.Unlock()
		return 0, s.opErr("write", net.ErrClosed)
	}
	s.writing = true
	s.wmu.Unlock()
	n, err := s.qs.Write(p)
	s.wmu.Lock()
	s.writing = false
	s.wmu.Unlock()
	if err != nil {
		err = s.opErr("write", err)
	}
	return n, err
}

// CloseWrite closes only the sending direction (the peer reads io.EOF after the
// data written so far), like TCP's half close. Not concurrently with Write.
func (s *Stream) CloseWrite() error { return s.qs.Close() }

// Close closes both directions. Data written before is still delivered, unless
// a Write is blocked at that moment: then the send side is reset, which
// unblocks the Write. It is idempotent.
func (s *Stream) Close() error {
	s.wmu.Lock()
	if s.closed.Swap(true) {
		s.wmu.Unlock()
		return nil
	}
	writing := s.writing
	s.wmu.Unlock()
	if s.release != nil {
		s.release()
	}
	s.qs.CancelRead(codeStreamClose)
	if writing {
		s.qs.CancelWrite(codeStreamClose)
	} else {
		_ = s.qs.Close() // fails only when the send side was reset, which is closed too
	}
	return nil
}

// LocalAddr returns the local address of the connection.
func (s *Stream) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// RemoteAddr returns the peer's address.
func (s *Stream) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// SetDeadline sets read and write deadlines.
func (s *Stream) SetDeadline(t time.Time) error { return s.qs.SetDeadline(t) }

// SetReadDeadline sets the read deadline.
func (s *Stream) SetReadDeadline(t time.Time) error { return s.qs.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline.
func (s *Stream) SetWriteDeadline(t time.Time) error { return s.qs.SetWriteDeadline(t) }

// opErr maps an error of a stream operation: net.ErrClosed after a local Close
// (as a closed TCP conn), and it drops a dead connection from the dial cache.
func (s *Stream) opErr(op string, err error) error {
	if err == io.EOF {
		return err // callers compare io.EOF by identity
	}
	if s.closed.Load() {
		return &net.OpError{Op: op, Net: "quic", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: net.ErrClosed}
	}
	if isConnErr(err) || s.conn.Context().Err() != nil {
		s.t.forget(s.key, s.conn)
		return fmt.Errorf("%s: connection to %s lost: %w", op, s.RemoteAddr(), err)
	}
	return refusedErr(err, s.RemoteAddr().String())
}

// isConnErr reports whether err ended the whole connection (as opposed to one
// stream being reset or timing out). Streams may see it before the
// connection's context is cancelled.
func isConnErr(err error) bool {
	var (
		idle *quic.IdleTimeoutError
		sr   *quic.StatelessResetError
		app  *quic.ApplicationError
		tr   *quic.TransportError
		hs   *quic.HandshakeTimeoutError
	)
	return errors.As(err, &idle) || errors.As(err, &sr) || errors.As(err, &app) ||
		errors.As(err, &tr) || errors.As(err, &hs)
}
