package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// StreamKind is the first byte written on every stream; it routes the stream to
// the listener of that kind.
type StreamKind byte

// Stream kinds.
const (
	// KindRaft streams carry hashicorp/raft NetworkTransport connections.
	KindRaft StreamKind = 1
	// KindControl streams carry one RPC request and its response each.
	KindControl StreamKind = 2
	// KindData streams carry batches from workers to clients.
	KindData StreamKind = 3
	// KindCache streams carry one cached split each, from the worker that
	// holds it to one that reads it (mesh/cachefetch.go). They travel on
	// the data connections, away from control RPCs.
	KindCache StreamKind = 4
)

// String names the kind for logs.
func (k StreamKind) String() string {
	switch k {
	case KindRaft:
		return "raft"
	case KindControl:
		return "control"
	case KindData:
		return "data"
	case KindCache:
		return "cache"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// ALPN is the TLS application protocol of feedmesh connections.
const ALPN = "feedmesh/1"

// Application error codes sent when this side closes or resets.
const (
	codeClosed       quic.ApplicationErrorCode = 0 // transport closed normally
	codeTooManyConns quic.ApplicationErrorCode = 1 // MaxIncomingConns or MaxConnsPerAddr reached
	codeStreamClose  quic.StreamErrorCode      = 0 // Stream.Close: stop reading
	codeRejected     quic.StreamErrorCode      = 1 // unknown kind, no kind byte, backlog full, per-peer stream limit
)

// udpBufferBytes is what quic-go asks of the kernel for socket buffers.
const udpBufferBytes = 7 << 20

// Transport is one node's QUIC endpoint: it accepts connections on one UDP
// socket and routes their streams by kind, and dials peers, caching one
// connection per address.
type Transport struct {
	cfg       Config
	log       *slog.Logger
	pc        net.PacketConn
	qt        *quic.Transport
	ln        *quic.Listener // nil for a client-only transport
	clientTLS *tls.Config
	dialConf  *quic.Config

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[StreamKind]*kindListener
	dialed    map[connKey]*dialEntry
	dataLane  atomic.Uint32
	incoming  map[*quic.Conn]*connState
	addrs     map[string]*addrState // remote IPs with incoming connections
	rpcBudget *ByteBudget           // MaxRPCBytesInFlight
	windows   *windowBudget         // MaxReceiveWindowBytes
	closeOnce sync.Once
}

// connKey names a cached outgoing connection: one per peer address for Raft and
// control streams, and a separate one for data streams. Flow-control windows
// are per connection, so unread batches on data streams (bounded by the
// client's credit, yet possibly many MiB) must not stall Raft heartbeats or
// control RPCs behind a full connection window.
type connKey struct {
	addr string
	data bool
	lane int // which of the DataConns data connections
}

func keyFor(addr string, kind StreamKind) connKey {
	return connKey{addr: addr, data: kind == KindData || kind == KindCache}
}

// keyForDial is keyFor, with data streams spread over DataConns lanes.
func (t *Transport) keyForDial(addr string, kind StreamKind) connKey {
	k := keyFor(addr, kind)
	if k.data && t.cfg.DataConns > 1 {
		k.lane = int(t.dataLane.Add(1) % uint32(t.cfg.DataConns))
	}
	return k
}

// dialEntry is a cached (or being dialled) connection to one address. Dials to
// the same address while it is being dialled wait for ready and share the result.
type dialEntry struct {
	ready chan struct{} // closed when the dial ended
	conn  *quic.Conn    // guarded by Transport.mu until ready is closed
	err   error         // likewise
}

// New starts a transport on pc. The caller owns pc and closes it after Close;
// pc may be any net.PacketConn (tests wrap it to inject faults). With serverTLS
// nil the transport only dials (CLI tools, clients). log may be nil.
// On Linux, with cfg.GROBuffers > 0, it turns on UDP_GRO on a *net.UDPConn pc
// (and leaves it on): read pc only through the transport.
func New(pc net.PacketConn, serverTLS, clientTLS *tls.Config, cfg Config, log *slog.Logger) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pc == nil {
		return nil, errors.New("transport: nil packet conn")
	}
	if clientTLS == nil {
		return nil, errors.New("transport: nil client TLS config")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if udp, ok := pc.(*net.UDPConn); ok {
		// Best effort: quic-go wants big buffers and warns otherwise.
		_ = udp.SetReadBuffer(udpBufferBytes)
		_ = udp.SetWriteBuffer(udpBufferBytes)
	}
	t := &Transport{
		cfg:       cfg,
		log:       log.With("addr", pc.LocalAddr().String()),
		pc:        pc,
		clientTLS: withALPN(clientTLS),
		listeners: make(map[StreamKind]*kindListener),
		dialed:    make(map[connKey]*dialEntry),
		incoming:  make(map[*quic.Conn]*connState),
		addrs:     make(map[string]*addrState),
		rpcBudget: NewByteBudget("MaxRPCBytesInFlight", cfg.MaxRPCBytesInFlight),
		windows:   newWindowBudget(cfg.MaxReceiveWindowBytes),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for _, k := range []StreamKind{KindRaft, KindControl, KindData} {
		t.listeners[k] = newKindListener(t, k)
	}
	t.qt = &quic.Transport{Conn: wrapGRO(pc, cfg.GROBuffers), StatelessResetKey: cfg.StatelessResetKey}
	t.dialConf = t.quicConfig()
	t.dialConf.MaxIncomingStreams = -1 // peers open streams on connections they dialled
	if serverTLS != nil {
		ln, err := t.qt.Listen(withALPN(serverTLS), t.quicConfig())
		if err != nil {
			t.cancel()
			t.qt.Close()
			return nil, fmt.Errorf("transport: listen on %s: %w", pc.LocalAddr(), err)
		}
		t.ln = ln
		t.wg.Go(t.acceptConns)
	}
	return t, nil
}

func (t *Transport) quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           t.cfg.HandshakeTimeout,
		MaxIdleTimeout:                 t.cfg.MaxIdleTimeout,
		KeepAlivePeriod:                t.cfg.KeepAlivePeriod,
		MaxIncomingStreams:             t.cfg.MaxIncomingStreams,
		MaxIncomingUniStreams:          -1,
		MaxStreamReceiveWindow:         t.cfg.StreamReceiveWindow,
		MaxConnectionReceiveWindow:     t.cfg.ConnectionReceiveWindow,
		InitialStreamReceiveWindow:     min(t.cfg.StreamReceiveWindow, t.cfg.InitialReceiveWindow),
		InitialConnectionReceiveWindow: min(t.cfg.ConnectionReceiveWindow, t.cfg.InitialReceiveWindow),
		AllowConnectionWindowIncrease:  t.windows.allow,
	}
}

// withALPN returns a copy of c that speaks TLS 1.3 with the feedmesh ALPN.
func withALPN(c *tls.Config) *tls.Config {
	c = c.Clone()
	c.MinVersion = tls.VersionTLS13
	c.NextProtos = []string{ALPN}
	return c
}

// Addr returns the local UDP address.
func (t *Transport) Addr() net.Addr { return t.pc.LocalAddr() }

// Listener returns the listener of one stream kind; Accept yields *Stream values.
// Listeners for KindRaft, KindControl and KindData exist from the start (streams
// queue in their backlog until accepted); other kinds are created on first call,
// before that their streams are reset. Calling Listener twice for a kind returns
// the same listener, also after it was closed.
func (t *Transport) Listener(kind StreamKind) net.Listener {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.listeners[kind]
	if !ok {
		l = newKindListener(t, kind)
		if t.closed {
			l.close()
		}
		t.listeners[kind] = l
	}
	return l
}

func (t *Transport) listener(kind StreamKind) *kindListener {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.listeners[kind]
}

// Close closes every connection (telling peers with CONNECTION_CLOSE) and every
// listener, and returns when all goroutines the transport started have returned.
// It does not close the packet conn. It is idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.cancel()
		conns := make([]*quic.Conn, 0, len(t.dialed)+len(t.incoming))
		for _, e := range t.dialed {
			select {
			case <-e.ready:
				if e.conn != nil {
					conns = append(conns, e.conn)
				}
			default: // the dial is aborted by quic.Transport.Close
			}
		}
		for c := range t.incoming {
			conns = append(conns, c)
		}
		ls := make([]*kindListener, 0, len(t.listeners))
		for _, l := range t.listeners {
			ls = append(ls, l)
		}
		t.mu.Unlock()

		for _, l := range ls {
			l.close()
		}
		if t.ln != nil {
			_ = t.ln.Close()
		}
		for _, c := range conns {
			_ = c.CloseWithError(codeClosed, "transport closed")
		}
		_ = t.qt.Close()
		t.wg.Wait()
		for _, l := range ls {
			l.drain()
		}
	})
	return nil
}

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
			t.log.Warn("connection refused: MaxIncomingConns reached", "remote", c.RemoteAddr().String(), "max", t.cfg.MaxIncomingConns)
			_ = c.CloseWithError(codeTooManyConns, "too many connections")
			continue
		}
		ip := remoteIP(c.RemoteAddr())
		as := t.addrs[ip]
		if as != nil && as.conns >= t.cfg.MaxConnsPerAddr {
			t.mu.Unlock()
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
		if cs.addr.conns--; cs.addr.conns == 0 && cs.addr.rpcStreams == 0 {
			delete(t.addrs, cs.addr.ip)
		}
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
		if cs.addr.rpcStreams--; cs.addr.conns == 0 && cs.addr.rpcStreams == 0 && t.addrs[cs.addr.ip] == cs.addr {
			delete(t.addrs, cs.addr.ip)
		}
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
	if kind == KindControl {
		if s.release = t.admitControl(cs); s.release == nil {
			t.log.Debug("control stream reset: MaxRPCStreamsPerConn or MaxRPCStreamsPerAddr reached", "remote", c.RemoteAddr().String())
			resetStream(qs, codeRejected)
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

// Dial opens a stream of the given kind to addr (host:port) and writes the kind
// byte. It reuses the cached connection to addr, and redials when that
// connection is closed or turns out dead when opening the stream. KindData
// streams use a second connection to the same address, so bulk data never
// holds up Raft and control traffic in a shared flow-control window.
//
// A connection that looks alive may still be stale (the peer restarted and has
// not answered yet); the first stream operation on it then fails, the
// connection is dropped from the cache, and the next Dial redials.
func (t *Transport) Dial(ctx context.Context, addr string, kind StreamKind) (*Stream, error) {
	for attempt := 0; ; attempt++ {
		key := t.keyForDial(addr, kind)
		c, fresh, err := t.conn(ctx, key)
		if err != nil {
			return nil, err
		}
		qs, err := c.OpenStreamSync(ctx)
		if err != nil {
			if ctx.Err() != nil && c.Context().Err() == nil && !isConnErr(err) {
				// The caller gave up waiting (for the peer to allow another
				// stream, say): the connection is fine, and other callers'
				// streams on it must not be cut.
				return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
			}
			t.forget(key, c)
			if ctx.Err() != nil || fresh || attempt > 0 {
				return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
			}
			continue // the cached connection died: redial once
		}
		s := newStream(t, c, qs, key)
		if dl, ok := ctx.Deadline(); ok {
			_ = qs.SetWriteDeadline(dl)
		}
		_, err = s.Write([]byte{byte(kind)})
		_ = qs.SetWriteDeadline(time.Time{})
		if err != nil {
			s.Close()
			if ctx.Err() != nil || fresh || attempt > 0 {
				return nil, fmt.Errorf("transport: open %s stream to %s: %w", kind, addr, err)
			}
			continue
		}
		return s, nil
	}
}

// conn returns a live connection for key, dialling (once, shared by concurrent
// callers) when none is cached. fresh reports that this call dialled it.
func (t *Transport) conn(ctx context.Context, key connKey) (c *quic.Conn, fresh bool, err error) {
	addr := key.addr
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false, fmt.Errorf("transport: dial %s: %w", addr, net.ErrClosed)
	}
	e, ok := t.dialed[key]
	if ok {
		select {
		case <-e.ready:
			if e.conn != nil && e.conn.Context().Err() == nil {
				t.mu.Unlock()
				return e.conn, false, nil
			}
			ok = false // dead or failed: replace
		default:
		}
	}
	if ok { // a dial is in flight: wait for it
		t.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("transport: dial %s: %w", addr, ctx.Err())
		}
		if e.err != nil {
			return nil, false, e.err
		}
		return e.conn, false, nil
	}
	e = &dialEntry{ready: make(chan struct{})}
	t.dialed[key] = e
	t.mu.Unlock()

	// e is in t.dialed, where forget reads e.conn under t.mu while the dial
	// is in flight: its fields are written under t.mu too.
	conn, derr := t.dial(ctx, addr)
	t.mu.Lock()
	e.conn, e.err = conn, derr
	if e.err != nil && t.dialed[key] == e {
		delete(t.dialed, key)
	}
	if e.err == nil && t.closed {
		_ = e.conn.CloseWithError(codeClosed, "transport closed")
		e.conn, e.err = nil, fmt.Errorf("transport: dial %s: %w", addr, net.ErrClosed)
	}
	close(e.ready)
	t.mu.Unlock()
	return e.conn, true, e.err
}

func (t *Transport) dial(ctx context.Context, addr string) (*quic.Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel) // Close aborts dials
	defer stop()
	c, err := t.qt.Dial(ctx, ua, t.clientTLS, t.dialConf)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	t.log.Debug("connected", "peer", addr)
	return c, nil
}

// forget drops c from the cache if it is still the entry for key, and closes it.
func (t *Transport) forget(key connKey, c *quic.Conn) {
	if key.addr == "" {
		return
	}
	t.mu.Lock()
	if e, ok := t.dialed[key]; ok && e.conn == c {
		delete(t.dialed, key)
	}
	t.mu.Unlock()
	_ = c.CloseWithError(codeClosed, "dropped")
}
