package client

import (
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Options configure a client. The zero value is usable.
type Options struct {
	// TLS verifies the nodes; nil means dev mode (encrypted, unverified).
	TLS *tls.Config
	// Token is an access token (`feedmesh token create`): every request
	// and data stream of the client acts as its principal, its tenant's
	// (docs/operating/security.md, "Tokens"). Empty: the principal of the
	// client certificate, or dev mode's.
	Token string
	// Transport configures QUIC; zero means transport.DefaultConfig().
	Transport *transport.Config
	// Window is the credit granted to each worker stream: how many batches
	// a worker may send ahead of what this client has consumed. Default 4.
	Window int
	// WindowBytes lets a stream of small batches have more in flight: the
	// stream's window grows above Window while Window × (mean batch bytes)
	// is below WindowBytes, up to the worker's cap (64 batches by default),
	// so the round trip of credits does not bound small batches' rate.
	// Default batch.DefaultWindowBytes (4 MiB: batches of 1 MiB and more
	// keep Window); negative keeps the window at Window.
	WindowBytes int64
	// StreamsPerWorker is how many streams the client reads from each
	// worker at once (each with its own Window). Above 1, the client's
	// transport spreads them over as many QUIC connections
	// (transport.Config.DataConns), which moves batches faster: quic-go
	// does its per-packet work on one goroutine per connection. Default 2
	// (1 MiB batches: 0.70x gRPC+TLS's MB/s against 0.46x with 1 stream,
	// docs/benchmarks/log.md); each stream has its own Window.
	StreamsPerWorker int
	// PrefetchBatches bounds the batches buffered in the client across all
	// workers. Default 16.
	PrefetchBatches int
	// PrefetchBytes bounds the bytes of buffered batches. Default 256 MiB.
	PrefetchBytes int64
	// RecycleBytes bounds the bytes of batch buffers the client keeps for
	// reuse after Batch.Release, so that receiving a batch reuses the
	// buffer of one already consumed instead of allocating (and later
	// garbage-collecting) a new one. Only batches released are recycled; a
	// consumer that never calls Release gets a new buffer per batch. Default
	// 64 MiB; negative turns recycling off.
	RecycleBytes int64
	// HeartbeatInterval is how often the client renews its consumer lease
	// and learns the job's current workers. Default 1 s.
	HeartbeatInterval time.Duration
	// RequestTimeout bounds each control request. Default 10 s.
	RequestTimeout time.Duration
	// ReceiptInterval (exactly-once jobs) is how often the client reports
	// the elements it received to the cluster (client/receipts.go): a
	// split is settled, and the job can end, only once receipts cover it.
	// Default 200 ms.
	ReceiptInterval time.Duration
	// LossWait (at-most-once DYNAMIC jobs that count their loss) bounds
	// how long the end of data waits for the job to finish, so that
	// Stats().ElementsLost is final when Next returns io.EOF: the last
	// receipts and fences applied, and the dead workers' splits counted.
	// It is waited only while the job is still running (another consumer
	// still reading, a census still running). Default 5 s; negative: do
	// not wait.
	LossWait time.Duration
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
	// ResumeWait bounds how long an iterator resumed from a checkpoint
	// (JobOptions.Resume) waits for the checkpoints of the job's other
	// consumers: a job that had several resumes once each of them has
	// resumed with its own, and hands out nothing until then. The client
	// warns (Logger, WARN) as soon as it finds the job waiting, saying for
	// how many; after ResumeWait, Next fails with ErrResumeWait. Default
	// 2 min; negative: wait for ever.
	ResumeWait time.Duration
	// UnavailableTimeout bounds how long an iteration goes on with no
	// word from the cluster: when neither a heartbeat has been answered
	// nor a batch received for that long (every node down, or cut off),
	// Next fails with an error that wraps transport.ErrUnavailable (or
	// transport.ErrNoQuorum when nodes answer but cannot commit), and
	// Close then returns at once instead of waiting RequestTimeout for
	// each of a last receipt report and the detach that no node can
	// take. Default 60 s (DefaultUnavailableTimeout); negative: wait for
	// ever.
	UnavailableTimeout time.Duration
	// OffloadProfiles is a file where offload auto remembers its
	// profiles per (pipeline, host) (client/profilecache.go), so that a
	// later job of the pipeline decides (and may cut it) without
	// profiling. "" (the default, and "off") keeps none anywhere: each job
	// profiles for itself, and no process's jobs change with what another
	// measured.
	OffloadProfiles string
	// OffloadColocation says how offload auto treats worker nodes on
	// this client's own host. "" (the default, or "detect"): when every
	// live worker node's address is one of this host's (loopback
	// included), the nodes prepare with the trainer's own CPUs, so auto
	// runs remote without profiling: a local worker beside them would
	// only take the CPUs they use (issue 42: on 3 and 5 co-located nodes
	// every share and local read slower than remote). "ignore": auto
	// profiles and decides from what it measures, as for nodes elsewhere
	// (nodes on this host with CPUs of their own, such as containers
	// pinned to other cores; in-process test clusters that emulate
	// remote nodes). A job whose auto chose a cut from a named profiles
	// file keeps it. Dial refuses any other value.
	OffloadColocation string
	// PacketConn is the UDP socket the client's QUIC transport sends and
	// receives on; nil opens one on an ephemeral port. The client owns it
	// either way: Close, or Dial when it fails, closes it. Only a *net.UDPConn gets the
	// transport's GRO; benchmarks wrap one to emulate a slower link.
	PacketConn net.PacketConn
	// ReorderStall (deterministic jobs: JobOptions.Order): a stream whose
	// batch is more than half of ReorderBatches' worth of windows ahead
	// of the next batch of the sequence waits; for every ReorderStall the
	// next batch is awaited, streams one window further ahead go on
	// (their workers may hold the window awaited, leased again after its
	// worker died, behind batches they cannot send), up to ReorderBatches,
	// the hard bound. Default 500 ms.
	ReorderStall time.Duration
}

// DefaultReorderStall is Options.ReorderStall's default.
const DefaultReorderStall = 500 * time.Millisecond

// DefaultResumeWait is Options.ResumeWait's default.
const DefaultResumeWait = 2 * time.Minute

// DefaultUnavailableTimeout is Options.UnavailableTimeout's default.
const DefaultUnavailableTimeout = time.Minute

// PrefetchBudget is the bytes of buffered batches a client with these
// options allows: PrefetchBytes, or its default.
func (o Options) PrefetchBudget() int64 { return o.withDefaults().PrefetchBytes }

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = 4
	}
	if o.WindowBytes == 0 {
		o.WindowBytes = batch.DefaultWindowBytes
	}
	if o.StreamsPerWorker <= 0 {
		o.StreamsPerWorker = 2
	}
	if o.PrefetchBatches <= 0 {
		o.PrefetchBatches = 16
	}
	if o.PrefetchBytes <= 0 {
		o.PrefetchBytes = 256 << 20
	}
	if o.RecycleBytes == 0 {
		o.RecycleBytes = 64 << 20
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.ReceiptInterval <= 0 {
		o.ReceiptInterval = 200 * time.Millisecond
	}
	if o.LossWait == 0 {
		o.LossWait = 5 * time.Second
	}
	if o.ReorderStall <= 0 {
		o.ReorderStall = DefaultReorderStall
	}
	if o.ResumeWait == 0 {
		o.ResumeWait = DefaultResumeWait
	}
	if o.UnavailableTimeout == 0 {
		o.UnavailableTimeout = DefaultUnavailableTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// BufferBound is the most bytes of batches a client with these options
// holds at once while reading from workers workers whose batches are all
// b bytes. With s = workers × StreamsPerWorker streams it adds up:
//
//   - the byte budget: batches the streams have put, or are putting, into
//     the iterator's buffer (PrefetchBatches of them) that Next has not yet
//     taken: min(PrefetchBytes, (PrefetchBatches + s) × b), one per stream
//     blocked on the full buffer;
//   - per stream, the batches the worker sent that were not yet credited
//     back: at most the stream's window (Window batches, grown for small
//     batches to WindowBytes / b, at most batch.DefaultMaxWindow), in QUIC
//     receive buffers or being decoded, and no more bytes than the QUIC
//     stream receive window plus the batch being decoded;
//   - the batch the application holds from its last Next.
//
// It is an upper bound on live batch bytes. Not counted: free buffers kept
// for reuse after Batch.Release (at most RecycleBytes), the up to 1/8
// larger capacity of recycled buffers (size classes), and the garbage
// collector's headroom (GOGC) above the live bytes.
func (o Options) BufferBound(workers int, b int64) int64 {
	o = o.withDefaults()
	tcfg := transport.DefaultConfig()
	if o.Transport != nil {
		tcfg = *o.Transport
	}
	window := int64(o.Window)
	if o.WindowBytes > 0 {
		window = max(window, min(o.WindowBytes/max(b, 1), batch.DefaultMaxWindow))
	}
	s := int64(workers * o.StreamsPerWorker)
	budget := min(o.PrefetchBytes, (int64(o.PrefetchBatches)+s)*b)
	perStream := min(window*b, int64(tcfg.StreamReceiveWindow)+b)
	return budget + s*perStream + b
}
