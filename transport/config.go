package transport

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/quic-go/quic-go"
)

// Config tunes a Transport and its frame codec. Start from DefaultConfig (production)
// or FastConfig (tests, in-process clusters) and change single fields.
type Config struct {
	// MaxHeaderBytes bounds the CBOR header of one frame. A frame announcing a
	// larger header is rejected with ErrFrameTooLarge before anything is allocated.
	// Headers carry names, dtypes, shapes and provenance, never bulk bytes.
	MaxHeaderBytes int

	// MaxFrameBytes bounds header plus tail of one frame, i.e. the largest batch
	// (or RPC body) a peer may send in one frame. Raise it for very large batches;
	// every reader may allocate up to this much per frame in flight.
	MaxFrameBytes int64

	// HandshakeTimeout bounds the QUIC+TLS handshake of a new connection (it is
	// quic-go's HandshakeIdleTimeout: the handshake is abandoned after this much
	// silence, or after twice this long in total).
	HandshakeTimeout time.Duration

	// KeepAlivePeriod is how often an otherwise idle connection sends a PING.
	// quic-go's default is off, which lets a connection to a dead peer idle for the
	// whole MaxIdleTimeout unnoticed and lets NATs forget it; keep it well below
	// MaxIdleTimeout.
	KeepAlivePeriod time.Duration

	// MaxIdleTimeout closes a connection that received nothing for this long. With
	// keep-alives on, it is how fast a vanished peer (crash, partition) is noticed:
	// streams to it fail after about this long.
	MaxIdleTimeout time.Duration

	// KindHeaderTimeout is how long an accepted stream may take to send its kind
	// byte before it is reset. It stops peers from pinning streams (and goroutines).
	KindHeaderTimeout time.Duration

	// AcceptBacklog bounds, per stream kind, the accepted streams that wait for
	// Listener.Accept. When the queue is full a new stream of that kind is reset,
	// so a slow consumer pushes back on its peers instead of growing memory.
	AcceptBacklog int

	// MaxIncomingConns bounds the connections peers may hold open to this node
	// (each peer node holds two: Raft/control and data; each client one or two);
	// further connection attempts are closed at once. Each connection costs
	// receive windows and a goroutine, so this bounds memory under a flood.
	MaxIncomingConns int

	// MaxIncomingStreams bounds the concurrently open streams a peer may open on
	// one connection (quic-go flow control on stream count).
	MaxIncomingStreams int64

	// MaxDataStreams bounds the data (batch) streams this node serves at once,
	// from all peers together: each costs the worker a goroutine, a batch
	// sender and its window of encoded batches. A data stream over it is reset
	// at once and the client's stream fails with ErrStreamRefused. The
	// default, 2048, serves 256 consumers of a shared job reading
	// StreamsPerWorker = 2 streams each four times over.
	MaxDataStreams int

	// MaxDataStreamsPerAddr is MaxDataStreams for one remote IP address. The
	// default, 1024, lets one trainer host run 256 consumers with two streams
	// each to this worker, twice over, while one address cannot take every
	// stream.
	MaxDataStreamsPerAddr int

	// MaxConcurrentRPCs bounds the requests an RPCServer serves at once; further
	// control streams wait in the accept backlog.
	MaxConcurrentRPCs int

	// MaxConnsPerAddr bounds the incoming connections from one remote IP
	// address (any port); further connection attempts from it are closed at
	// once. It keeps one address from taking all of MaxIncomingConns. A peer
	// node holds 1+DataConns connections, a client 1+StreamsPerWorker: the
	// default, a quarter of MaxIncomingConns, leaves room for a machine that
	// runs several nodes and dozens of trainer processes (they share its
	// IP, as a NAT's clients do) while one address still cannot take them all.
	MaxConnsPerAddr int

	// MaxRPCStreamsPerConn bounds the control streams one incoming connection
	// may have open at the node (queued for or in an RPCServer, from their
	// kind byte until the request is answered); further control streams on it
	// are reset at once. With MaxRPCStreamsPerAddr it keeps one peer's streams
	// from taking every one of MaxConcurrentRPCs and the accept backlog.
	MaxRPCStreamsPerConn int

	// MaxRPCStreamsPerAddr is MaxRPCStreamsPerConn summed over all
	// connections from one remote IP address.
	MaxRPCStreamsPerAddr int

	// RPCIdleTimeout is how long an RPCServer waits for the next bytes of a
	// request (or for request-byte budget) before it refuses the request and
	// frees the stream. A request as a whole still has the server's read
	// timeout (DefaultRPCReadTimeout). It frees slots that idle streams hold.
	RPCIdleTimeout time.Duration

	// MaxRPCBytesInFlight bounds the request bytes all RPCServers on this
	// transport hold at once, summed over requests being read or handled. A
	// request body is read as its bytes arrive (never allocated from the length
	// it announces); beyond its first 64 KiB, every byte is taken from this
	// budget (and MaxRPCBytesPerConn) before it is read, and given back when
	// the handler returns. A request that cannot get budget within
	// RPCIdleTimeout is refused as unavailable. Small requests (all of a
	// member's usual control traffic) never wait for it.
	MaxRPCBytesInFlight int64

	// MaxRPCBytesPerConn is MaxRPCBytesInFlight for one incoming connection,
	// so one connection cannot take the whole node budget.
	MaxRPCBytesPerConn int64

	// StreamReceiveWindow is the largest flow-control window of one stream
	// (quic-go's MaxStreamReceiveWindow): how many bytes a sender may have in
	// flight on a stream.
	StreamReceiveWindow uint64

	// ConnectionReceiveWindow is the largest flow-control window of one
	// connection (quic-go's MaxConnectionReceiveWindow), shared by its streams.
	// Together with the number of peers it bounds receive buffering.
	ConnectionReceiveWindow uint64

	// InitialReceiveWindow is the flow-control window each connection and
	// each stream starts with (quic-go's InitialConnectionReceiveWindow
	// and InitialStreamReceiveWindow, capped by the two above): what a
	// peer may send that nobody reads, per connection, before any window
	// grows. Auto-tuning grows the windows of connections whose data is
	// read fast, out of MaxReceiveWindowBytes. Default 512 KiB, for
	// receivers of bulk data (a client); a node, which receives little
	// besides control requests and Raft, starts its connections at 64 KiB
	// (mesh.DefaultConfig) so that MaxIncomingConns strangers hold little.
	InitialReceiveWindow uint64

	// MaxReceiveWindowBytes bounds, over all of this transport's
	// connections together, how much quic-go's window auto-tuning may add
	// to their flow-control windows beyond InitialReceiveWindow
	// (window.go): what peers can make this node buffer unread is at most
	// this plus InitialReceiveWindow per connection. A connection denied
	// an increase keeps working at its current window. Default 256 MiB
	// (48 MiB for a node: mesh.DefaultConfig).
	MaxReceiveWindowBytes int64

	// DataConns is how many QUIC connections to one peer carry data streams;
	// new data streams take them in turn. quic-go spends its CPU per packet
	// and per connection on one goroutine, so on a fast path several
	// connections (with a client reading several streams per worker) move
	// more bytes than one: 4 connections gave 0.53-0.63x gRPC+TLS at 16 MiB
	// batches where one gave 0.34-0.40x (docs/benchmarks/log.md). Default 1.
	DataConns int

	// GROBuffers is how many 64 KiB buffers the transport reads coalesced
	// UDP datagrams into with UDP generic receive offload (Linux): the kernel
	// delivers quic-go's GSO batches whole instead of packet by packet, and the
	// transport splits them for quic-go. It bounds the receive memory this adds
	// per socket (GROBuffers × 64 KiB) and the packets one system call brings
	// (up to GROBuffers × 44). 0 turns GRO off (quic-go reads 8 packets per
	// system call). Only a *net.UDPConn gets GRO; on other systems it is a
	// no-op. Default 8.
	GROBuffers int

	// StatelessResetKey, when set, lets this node answer packets of connections
	// it does not know (because it restarted) with a stateless reset, so peers
	// drop their stale connection at once instead of after MaxIdleTimeout. A node
	// derives it from its persistent identity so it survives restarts. Optional.
	StatelessResetKey *quic.StatelessResetKey
}

// DeriveStatelessResetKey derives a StatelessResetKey from a node's persistent
// secret (e.g. its private key bytes or a random value kept in the data dir), so
// the key is the same after a restart. Different secrets give unrelated keys.
func DeriveStatelessResetKey(secret []byte) *quic.StatelessResetKey {
	h := sha256.New()
	h.Write([]byte("feedmesh/1 stateless reset key\x00"))
	h.Write(secret)
	var k quic.StatelessResetKey
	copy(k[:], h.Sum(nil))
	return &k
}

// DefaultConfig returns the production settings.
func DefaultConfig() Config {
	return Config{
		MaxHeaderBytes:          64 << 10,
		MaxFrameBytes:           256 << 20,
		HandshakeTimeout:        5 * time.Second,
		KeepAlivePeriod:         time.Second,
		MaxIdleTimeout:          5 * time.Second,
		KindHeaderTimeout:       5 * time.Second,
		AcceptBacklog:           256,
		MaxIncomingConns:        1024,
		MaxIncomingStreams:      1024,
		MaxDataStreams:          2048,
		MaxDataStreamsPerAddr:   1024,
		MaxConcurrentRPCs:       256,
		MaxConnsPerAddr:         256,
		MaxRPCStreamsPerConn:    64,
		MaxRPCStreamsPerAddr:    128,
		RPCIdleTimeout:          2 * time.Second,
		MaxRPCBytesInFlight:     64 << 20,
		MaxRPCBytesPerConn:      16 << 20,
		StreamReceiveWindow:     16 << 20,
		ConnectionReceiveWindow: 48 << 20,
		InitialReceiveWindow:    512 << 10,
		MaxReceiveWindowBytes:   256 << 20,
		DataConns:               1,
		GROBuffers:              8,
	}
}

// FastConfig returns settings for tests and in-process clusters on loopback:
// failures are detected in about a second and a half.
func FastConfig() Config {
	c := DefaultConfig()
	c.HandshakeTimeout = 2 * time.Second
	c.KeepAlivePeriod = 300 * time.Millisecond
	c.MaxIdleTimeout = 1500 * time.Millisecond
	c.KindHeaderTimeout = 500 * time.Millisecond
	c.MaxFrameBytes = 64 << 20
	c.RPCIdleTimeout = time.Second
	return c
}

// maxHeaderLimit is the largest MaxHeaderBytes accepted: the frame prefix stores
// the header length in 32 bits and a header is never meant to be bulky.
const maxHeaderLimit = 16 << 20

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("transport config: %s %s", field, fmt.Sprintf(format, args...)))
	}
	if c.MaxHeaderBytes < 16 || c.MaxHeaderBytes > maxHeaderLimit {
		bad("MaxHeaderBytes", "is %d, must be in [16, %d]", c.MaxHeaderBytes, maxHeaderLimit)
	}
	if c.MaxFrameBytes < int64(c.MaxHeaderBytes) {
		bad("MaxFrameBytes", "is %d, must be at least MaxHeaderBytes (%d)", c.MaxFrameBytes, c.MaxHeaderBytes)
	}
	if c.HandshakeTimeout <= 0 {
		bad("HandshakeTimeout", "is %s, must be positive", c.HandshakeTimeout)
	}
	if c.MaxIdleTimeout <= 0 {
		bad("MaxIdleTimeout", "is %s, must be positive", c.MaxIdleTimeout)
	}
	if c.KeepAlivePeriod <= 0 || c.KeepAlivePeriod >= c.MaxIdleTimeout {
		bad("KeepAlivePeriod", "is %s, must be positive and below MaxIdleTimeout (%s)", c.KeepAlivePeriod, c.MaxIdleTimeout)
	}
	if c.KindHeaderTimeout <= 0 {
		bad("KindHeaderTimeout", "is %s, must be positive", c.KindHeaderTimeout)
	}
	if c.AcceptBacklog <= 0 {
		bad("AcceptBacklog", "is %d, must be positive", c.AcceptBacklog)
	}
	if c.DataConns < 1 || c.DataConns > 16 {
		bad("DataConns", "is %d, want 1 to 16", c.DataConns)
	}
	if c.GROBuffers < 0 || c.GROBuffers > 64 {
		bad("GROBuffers", "is %d, want 0 (off) to 64", c.GROBuffers)
	}
	if c.MaxIncomingConns <= 0 {
		bad("MaxIncomingConns", "is %d, must be positive", c.MaxIncomingConns)
	}
	if c.MaxIncomingStreams <= 0 || c.MaxIncomingStreams > 1<<60 {
		bad("MaxIncomingStreams", "is %d, must be in [1, 2^60]", c.MaxIncomingStreams)
	}
	if c.MaxDataStreams <= 0 {
		bad("MaxDataStreams", "is %d, must be positive", c.MaxDataStreams)
	}
	if c.MaxDataStreamsPerAddr <= 0 {
		bad("MaxDataStreamsPerAddr", "is %d, must be positive", c.MaxDataStreamsPerAddr)
	}
	if c.MaxConcurrentRPCs <= 0 {
		bad("MaxConcurrentRPCs", "is %d, must be positive", c.MaxConcurrentRPCs)
	}
	if c.MaxConnsPerAddr <= 0 {
		bad("MaxConnsPerAddr", "is %d, must be positive", c.MaxConnsPerAddr)
	}
	if c.MaxRPCStreamsPerConn <= 0 {
		bad("MaxRPCStreamsPerConn", "is %d, must be positive", c.MaxRPCStreamsPerConn)
	}
	if c.MaxRPCStreamsPerAddr < c.MaxRPCStreamsPerConn {
		bad("MaxRPCStreamsPerAddr", "is %d, must be at least MaxRPCStreamsPerConn (%d)", c.MaxRPCStreamsPerAddr, c.MaxRPCStreamsPerConn)
	}
	if c.RPCIdleTimeout <= 0 {
		bad("RPCIdleTimeout", "is %s, must be positive", c.RPCIdleTimeout)
	}
	if c.MaxRPCBytesPerConn < DefaultMaxRPCRequestBytes {
		bad("MaxRPCBytesPerConn", "is %d, must be at least DefaultMaxRPCRequestBytes (%d)", c.MaxRPCBytesPerConn, DefaultMaxRPCRequestBytes)
	}
	if c.MaxRPCBytesInFlight < c.MaxRPCBytesPerConn {
		bad("MaxRPCBytesInFlight", "is %d, must be at least MaxRPCBytesPerConn (%d)", c.MaxRPCBytesInFlight, c.MaxRPCBytesPerConn)
	}
	if c.StreamReceiveWindow < 64<<10 {
		bad("StreamReceiveWindow", "is %d, must be at least 64 KiB", c.StreamReceiveWindow)
	}
	if c.ConnectionReceiveWindow < c.StreamReceiveWindow {
		bad("ConnectionReceiveWindow", "is %d, must be at least StreamReceiveWindow (%d)", c.ConnectionReceiveWindow, c.StreamReceiveWindow)
	}
	if c.InitialReceiveWindow < 16<<10 || c.InitialReceiveWindow > c.StreamReceiveWindow {
		bad("InitialReceiveWindow", "is %d, must be in [16 KiB, StreamReceiveWindow (%d)]", c.InitialReceiveWindow, c.StreamReceiveWindow)
	}
	if c.MaxReceiveWindowBytes <= 0 {
		bad("MaxReceiveWindowBytes", "is %d, must be positive", c.MaxReceiveWindowBytes)
	}
	return errors.Join(errs...)
}
