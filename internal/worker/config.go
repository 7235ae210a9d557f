package worker

import "time"

// Config bounds what a node does as a worker (mesh.Config.Worker).
type Config struct {
	// SendPadded ships padded tensors as they are. By default a tensor with
	// a "<name>_length" companion (padded_batch, bucket_by_sequence_length)
	// travels as its rows' valid prefixes, integer token ids in the fewest
	// bytes that hold them, and the client pads (and widens) it back: the
	// same batch, fewer bytes (batch.ShippedEncodeOptions).
	SendPadded bool
	// Disabled keeps the node out of every job: it serves control and Raft
	// only, like a dedicated Consul server.
	Disabled bool
	// TaskBuffer is how many encoded batches a task keeps ready ahead of
	// its consumers. It bounds a task's memory together with the client's
	// window: a client that never grants credit stops the task here.
	TaskBuffer int
	// LeaseSplits is the most splits a DYNAMIC task asks for per lease (the
	// leader hands out fewer when fewer are left in the epoch). How many
	// it asks for below that is leasePolicy's decision (leasepolicy.go).
	LeaseSplits int
	// LeaseDuration is how much work a DYNAMIC task aims to lease at once:
	// it asks for as many splits as it reads in this time (at most
	// LeaseSplits), so cheap pipelines do not pay a Raft commit every few
	// milliseconds. Longer means fewer commits, and more splits lost when
	// a worker dies (at-most-once).
	LeaseDuration time.Duration
	// LeaseHoldShare bounds what a DYNAMIC task holds leased and not yet
	// read, as a share of the job's splits (an epoch's): its queue, and
	// so a lease, never exceeds this share (at least one split), however
	// fast the pipeline seems. It bounds how unevenly workers that read
	// together end a job: a worker that misjudged its rate (the first
	// splits after a resume's skipped ones are read while buffers fill)
	// holds no more than this beyond the split it reads. 0 means
	// DefaultLeaseHoldShare (1/16); negative: no such bound.
	LeaseHoldShare float64
	// OrphanPollInterval (exactly-once DYNAMIC jobs) is how often a task
	// whose leases are done asks again, until its job is complete: a dead
	// worker's splits come back to be read again (splits/exactly.go).
	// Default 250 ms.
	OrphanPollInterval time.Duration
	// ProduceInterval (exactly-once DYNAMIC jobs) paces a task's reports
	// of the splits it has emitted completely (each one Raft command per
	// epoch it covers): at most one starts per interval, carrying every
	// split completed since the last. A split settles once its report and
	// the consumers' receipts are in, so this adds up to an interval to
	// when a split settles, not to delivery; the end of a task's leases
	// is reported at once. 0 means DefaultProduceInterval; negative
	// sends each report as soon as the one before has landed (a Raft
	// command per commit round trip on a fast pipeline).
	ProduceInterval time.Duration
	// FailoverAhead is how much work a DYNAMIC task keeps leased ahead, at
	// least, so that its pipeline does not run dry while a dead Raft
	// leader is replaced (no lease is granted meanwhile): it asks for the
	// next lease while its queued splits cover less than this (or than the
	// time it has been reading, early in a job), and number fewer than
	// LeaseSplits. 0 means the default, derived from the Raft
	// timing (failoverTime: 3 s with the default preset, 300 ms with the
	// fast one); negative turns it off (splits are then asked for only
	// twice a lease's round trip ahead). Longer rides out slower
	// elections, and holds more splits per worker: up to this much more
	// work is lost when a worker dies (at-most-once), and the end of an
	// epoch waits for the slowest worker's queue.
	FailoverAhead time.Duration
	// MaxWindow caps the credit a client may grant on one stream.
	MaxWindow int
	// SendCoalesce is the most ready batches a stream writes at once (no
	// more than the client has credit for): small batches then share one
	// quic-go stream write instead of paying one each. It bounds the
	// batches a consumer's stream has taken from its task but not yet
	// written, which are lost with the consumer if it dies (at-most-once,
	// like the task's buffer). 1 writes batch by batch. Default 16.
	SendCoalesce int
	// JobPollInterval is how often a task checks that its job still exists
	// while it has nothing to do (no consumer reading, or finished).
	JobPollInterval time.Duration
	// ShareWindowBytes bounds each ephemeral-sharing window on this worker
	// (one per dataset that jobs with Share read at once; the issue's
	// share.window_bytes): the bytes of encoded batches kept for sharing
	// jobs that lag behind the fastest. A job more than this far behind
	// misses batches instead of slowing the others; a single batch larger
	// than this fails the shared production with an error that says so.
	// Default 256 MiB (share.DefaultWindowBytes); the fast preset 32 MiB.
	// The bound counts batches as encoded: a batch sent compressed to some
	// of the jobs (api.JobOptions.Compression) also keeps its compressed copy,
	// at most its own size again per compression in use.
	ShareWindowBytes int64
	// RoundsAhead (coordinated jobs) is how many complete round windows
	// (m batches each) a task prepares ahead of the consumers' requests.
	// 0 means DefaultRoundsAhead.
	RoundsAhead int
	// RoundsHeld (coordinated jobs) bounds the rounds a task keeps assigned
	// while some of their m batches are not yet taken (a consumer that died
	// never takes its batch). Past it the oldest round is dropped; a late
	// request for it is told to skip the round. It must exceed how far the
	// fastest consumer of a job runs ahead of the slowest: up to twice the
	// client's PrefetchBatches when the consumers step together (a rank
	// that stalls longer loses rounds, at most once each). Besides them,
	// a task keeps the batch each consumer index took last, for a retry
	// of a stream that broke (roundserver.go). 0 means DefaultRoundsHeld.
	RoundsHeld int
}

// Defaults of Config.RoundsAhead and RoundsHeld.
const (
	DefaultRoundsAhead = 4
	DefaultRoundsHeld  = 512
)

// DefaultProduceInterval is Config.ProduceInterval's default.
const DefaultProduceInterval = 250 * time.Millisecond

// produceInterval is ProduceInterval with its default applied (0: no
// pause between reports).
func (c Config) produceInterval() time.Duration {
	switch {
	case c.ProduceInterval < 0:
		return 0
	case c.ProduceInterval == 0:
		return DefaultProduceInterval
	}
	return c.ProduceInterval
}

// roundsAhead is RoundsAhead with its default applied.
func (c Config) roundsAhead() int {
	if c.RoundsAhead <= 0 {
		return DefaultRoundsAhead
	}
	return c.RoundsAhead
}

// roundsHeld is RoundsHeld with its default applied.
func (c Config) roundsHeld() int {
	if c.RoundsHeld <= 0 {
		return DefaultRoundsHeld
	}
	return c.RoundsHeld
}

// failoverAhead is FailoverAhead with its default applied (0: off):
// failover, about the longest a Raft leader's death leaves the cluster
// without one, as the node's Raft timing says.
func (c Config) failoverAhead(failover time.Duration) time.Duration {
	switch {
	case c.FailoverAhead < 0:
		return 0
	case c.FailoverAhead == 0:
		return failover
	}
	return c.FailoverAhead
}
