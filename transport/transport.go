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
	// dataStreams counts the data streams routed and not closed
	// (MaxDataStreams); guarded by mu.
	dataStreams int
	refused     refusals
	closeOnce   sync.Once
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
