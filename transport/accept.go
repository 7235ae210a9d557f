package transport

import (
	"time"

	"github.com/quic-go/quic-go"
)

// The accepting side: incoming connections admitted within the limits
// against hostile peers (limits.go), and their streams routed by their kind
// byte to the listener of that kind.

// acceptConns accepts incoming connections until the transport closes.
func (t *Transport) acceptConns() {
	for {
		c, err := t.ln.Accept(t.ctx)
		if err != nil {
			if t.ctx.Err() == nil {
				t.log.Warn("accept connections stopped", "err", err)
			}
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = c.CloseWithError(codeClosed, "transport closed")
			continue
		}
		if len(t.incoming) >= t.cfg.MaxIncomingConns {
			t.mu.Unlock()
			t.refused.conns.Add(1)
			t.log.Warn("connection refused: MaxIncomingConns reached", "remote", c.RemoteAddr().String(), "max", t.cfg.MaxIncomingConns)
			_ = c.CloseWithError(codeTooManyConns, "too many connections")
			continue
		}
		ip := remoteIP(c.RemoteAddr())
		as := t.addrs[ip]
		if as != nil && as.conns >= t.cfg.MaxConnsPerAddr {
			t.mu.Unlock()
			t.refused.conns.Add(1)
			t.log.Debug("connection refused: MaxConnsPerAddr reached", "remote", c.RemoteAddr().String(), "max", t.cfg.MaxConnsPerAddr)
			_ = c.CloseWithError(codeTooManyConns, "too many connections from this address")
			continue
		}
		if as == nil {
			as = &addrState{ip: ip}
			t.addrs[ip] = as
		}
		as.conns++
		cs := &connState{addr: as, budget: NewByteBudget("MaxRPCBytesPerConn", t.cfg.MaxRPCBytesPerConn)}
		t.incoming[c] = cs
		t.mu.Unlock()
		t.wg.Go(func() { t.serveConn(c, cs) })
	}
}

// serveConn accepts the streams of one incoming connection; quic-go bounds how
// many are open at once (MaxIncomingStreams), which bounds routeStream goroutines.
func (t *Transport) serveConn(c *quic.Conn, cs *connState) {
	defer func() {
		t.mu.Lock()
		delete(t.incoming, c)
		cs.addr.conns--
		t.dropAddrLocked(cs.addr)
		t.mu.Unlock()
	}()
	for {
		qs, err := c.AcceptStream(t.ctx)
		if err != nil {
			return
		}
		t.wg.Go(func() { t.routeStream(c, cs, qs) })
	}
}

// admitControl counts a control stream against its connection's and
// address's limits; it returns the function that gives it back, or nil when
// a limit is reached.
func (t *Transport) admitControl(cs *connState) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cs.rpcStreams >= t.cfg.MaxRPCStreamsPerConn || cs.addr.rpcStreams >= t.cfg.MaxRPCStreamsPerAddr {
		return nil
	}
	cs.rpcStreams++
	cs.addr.rpcStreams++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		cs.rpcStreams--
		cs.addr.rpcStreams--
		t.dropAddrLocked(cs.addr)
	}
}

// routeStream reads the kind byte of an accepted stream and queues the stream
// on that kind's listener; it resets streams that are slow, of unknown kind, or
// that find the backlog full.
func (t *Transport) routeStream(c *quic.Conn, cs *connState, qs *quic.Stream) {
	_ = qs.SetReadDeadline(time.Now().Add(t.cfg.KindHeaderTimeout))
	var b [1]byte
	_, err := qs.Read(b[:])
	_ = qs.SetReadDeadline(time.Time{})
	if err != nil {
		t.log.Debug("stream without kind byte reset", "remote", c.RemoteAddr().String(), "err", err)
		resetStream(qs, codeRejected)
		return
	}
	kind := StreamKind(b[0])
	l := t.listener(kind)
	if l == nil {
		t.log.Warn("stream of unknown kind reset", "remote", c.RemoteAddr().String(), "kind", b[0])
		resetStream(qs, codeRejected)
		return
	}
	s := newStream(t, c, qs, connKey{})
	s.in = cs
	switch kind {
	case KindControl:
		if s.release = t.admitControl(cs); s.release == nil {
			t.refused.control.Add(1)
			t.log.Debug("control stream reset: MaxRPCStreamsPerConn or MaxRPCStreamsPerAddr reached", "remote", c.RemoteAddr().String())
			resetStream(qs, codeRejected)
			return
		}
	case KindData:
		var err error
		if s.release, err = t.admitData(cs); err != nil {
			t.refused.data.Add(1)
			t.log.Debug("data stream refused", "remote", c.RemoteAddr().String(), "why", err.Error())
			resetStream(qs, codeTooManyStreams)
			return
		}
	}
	if !l.offer(s) {
		t.log.Warn("stream reset: listener closed or backlog full", "remote", c.RemoteAddr().String(), "kind", kind.String())
		s.Close()
		resetStream(qs, codeRejected)
	}
}

func resetStream(qs *quic.Stream, code quic.StreamErrorCode) {
	qs.CancelRead(code)
	qs.CancelWrite(code)
}
