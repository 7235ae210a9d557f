package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
)

// LeaseConfig is what one lease loop needs: who leases what, how the leases
// are sized, and the hooks by which a node and a client's local worker
// differ.
type LeaseConfig struct {
	// Job is the lease identity: the job, or its share group.
	Job string
	// JobID is the ID of the job the task runs (0: unchecked; a share
	// group's).
	JobID uint64
	// Worker is the name the splits are leased under: a node's name, or a
	// consumer's local worker name (jobspec.LocalWorkerName).
	Worker string
	// Incarnation is the node's process incarnation (0 for a local worker).
	Incarnation uint64
	// Splits is the job's split enumeration, which every worker computes
	// alike: a lease names splits by their position in it.
	Splits pipeline.SplitList
	// Exact: the job is exactly-once. The pipeline reports what it
	// emitted (Produced), not what it read, and leases may carry
	// exclusions. A phase ends when the leases are done; AwaitMore then
	// waits for a dead worker's splits, or the job's end.
	Exact bool

	// LeaseSplits, LeaseDuration and FailoverAhead size the leases
	// (leasePolicy): at most LeaseSplits, LeaseDuration's worth at the
	// pipeline's rate, asked ahead to cover a leader's failover (0: not).
	LeaseSplits   int
	LeaseDuration time.Duration
	FailoverAhead time.Duration
	// HoldShare bounds the splits queued to this share of Splits
	// (Config.LeaseHoldShare; 0: the default, negative: none).
	HoldShare float64
	// Poll is how often a loop whose lease brought nothing asks again:
	// between exactly-once phases, and while a job hands out nothing yet
	// (a resumed job waiting for its checkpoints).
	Poll time.Duration
	// ProduceInterval is the least time between two reports of produced
	// splits (0: none), so a fast pipeline of small splits costs a few
	// Raft commands a second.
	ProduceInterval time.Duration
	// RequestTimeout bounds the last report of finished splits, at Close.
	RequestTimeout time.Duration

	// Drain, closed when the node starts a graceful shutdown (nil: this
	// loop does not drain): it asks for nothing more, hands the splits it
	// has not started back to the others, and ends once the split in
	// progress is read.
	Drain <-chan struct{}
	// Stop, done when the worker is to take no more splits (nil: never):
	// a client's retiring local worker, whose splits the cluster gives to
	// the nodes once it is expired. Nothing is handed back.
	Stop context.Context
	// OnDismiss, if set, is called when a lease is refused because the
	// job dismissed this worker (api.ErrDismissed); the loop then drains.
	OnDismiss func()
	// Gate, if set, holds the worker to its share of the job.
	Gate Gate
	// Held, if set, returns the splits this worker's autocache holds for
	// the job: leases prefer them.
	Held func() ranges.Set
	// WholePipeline: the worker runs the whole pipeline whatever the
	// job's cut (a client's local worker makes whole batches in the
	// consumer's process), so the cut leases carry does not apply to it.
	// A node runs the prefix of a cut job: a cut set while it runs ends
	// the pipeline's phase (TakeRecut).
	WholePipeline bool
	// RunsCensus: the worker (a consumer's local worker) runs a census,
	// a phase whose pipeline delivers nothing (Census), so the cluster may
	// lease it one (api.LeaseRequest.RunsCensus). A node's leases do not
	// say: nodes always do.
	RunsCensus bool
	// Cut is the cut the first pipeline opens with; JobCut, if set, reads
	// the job's cut now from the node's Raft state (a cut set while the
	// job runs shows there before a lease says so).
	Cut    int
	JobCut func() int
	// Waited, if not nil, adds the ns Next waited with no split queued.
	Waited *atomic.Int64
	// Log receives the loop's warnings.
	Log *slog.Logger
}
