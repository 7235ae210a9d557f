package mesh

import (
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/bucketing"
	"github.com/feedmesh/feedmesh/raftstate"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Control API methods for jobs. Every one of them is answered by the
// leader: any node forwards.
const (
	MethodDistribute = "job.distribute" // register dataset, create or join job, attach a consumer
	MethodHeartbeat  = "job.heartbeat"  // renew a consumer's lease; returns the job's workers
	MethodDetach     = "job.detach"     // a consumer leaves
	MethodJobs       = "jobs.list"      // every job
	MethodJobGet     = "job.get"        // one job and its dataset spec (workers use it)
	MethodLease      = "worker.lease"   // DYNAMIC: lease splits
	MethodFinish     = "worker.finish"  // DYNAMIC: report finished splits
)

// MethodShareStats is answered by the node asked, never forwarded: its own
// ephemeral-sharing counters (ShareStatsRequest → WorkerShareStats).
const MethodShareStats = "worker.sharestats"

// Sharding policy names on the wire and in the CLI.
const (
	ShardingOff     = "off"
	ShardingDynamic = "dynamic"
	ShardingStatic  = "static"
)

// JobOptions are what a client asks for when it creates or joins a job.
// Two clients that name the same job must ask for the same options.
type JobOptions struct {
	Sharding     string `json:"sharding"`
	Epochs       int64  `json:"epochs"`
	NumConsumers int    `json:"num_consumers,omitempty"`
	// Share: jobs of the same dataset, sharding and epochs that all set it
	// share one production per worker (ephemeral sharing): each worker
	// computes a batch once and hands the same encoded frame to every such
	// job. A job that falls more than the worker's share window behind
	// misses batches (relaxed visitation) instead of slowing the others.
	Share bool `json:"share,omitempty"`
	// Coordinated: consumers read in rounds; in round r every one of the
	// NumConsumers consumers gets a batch of the same bucket from the one
	// worker that serves round r (see coordinated.go). Needs sharding
	// dynamic (the default for it), NumConsumers >= 1 and a spec that ends
	// in bucket_by_sequence_length.
	Coordinated bool `json:"coordinated,omitempty"`
	// PadFinalRound (coordinated): pad a worker's final partial windows out
	// with empty batches instead of dropping them.
	PadFinalRound bool `json:"pad_final_round,omitempty"`
	MaxWorkers    int  `json:"max_workers,omitempty"`
	// ConsumerTTL is how long a consumer's lease lasts without a heartbeat.
	ConsumerTTL time.Duration `json:"consumer_ttl"`
	// GCAfter is how long a job lives with no consumer attached.
	GCAfter time.Duration `json:"gc_after"`
	// Compression: workers compress the job's batches on the wire with
	// "lz4" or "zstd" (batch.Compression); "" or "none" sends them as they
	// are. Consumers ask for it when they open their streams; a worker
	// grants a stream only its job's compression (none otherwise).
	Compression string `json:"compression,omitempty"`
}

// withDefaults fills zero fields.
func (o JobOptions) withDefaults() JobOptions {
	if o.Sharding == "" {
		o.Sharding = ShardingOff
		if o.Coordinated {
			o.Sharding = ShardingDynamic
		}
	}
	if o.Epochs == 0 {
		o.Epochs = 1
	}
	if o.ConsumerTTL == 0 {
		o.ConsumerTTL = 30 * time.Second
	}
	if o.GCAfter == 0 {
		o.GCAfter = time.Minute
	}
	return o
}

// Validate checks the options; errors name the field.
func (o JobOptions) Validate() error {
	switch o.Sharding {
	case ShardingOff, ShardingDynamic, ShardingStatic:
	default:
		return fmt.Errorf("sharding: %q is not off, dynamic or static", o.Sharding)
	}
	if o.Epochs < 1 {
		return fmt.Errorf("epochs: must be >= 1, got %d", o.Epochs)
	}
	if o.NumConsumers < 0 || o.MaxWorkers < 0 {
		return fmt.Errorf("num_consumers and max_workers must be >= 0")
	}
	if o.ConsumerTTL < 0 || o.GCAfter < 0 {
		return fmt.Errorf("consumer_ttl and gc_after must be >= 0")
	}
	if o.Coordinated {
		switch {
		case o.Sharding != ShardingDynamic:
			return fmt.Errorf("coordinated: needs sharding dynamic (workers read disjoint splits), not %s", o.Sharding)
		case o.NumConsumers < 1 || o.NumConsumers > raftstate.MaxRoundConsumers:
			return fmt.Errorf("coordinated: num_consumers must be 1..%d (the consumers of each round), got %d", raftstate.MaxRoundConsumers, o.NumConsumers)
		case o.Share:
			return fmt.Errorf("coordinated: cannot be combined with share")
		}
	} else if o.PadFinalRound {
		return fmt.Errorf("pad_final_round: only for coordinated jobs")
	}
	if _, err := batch.ParseCompression(o.Compression); err != nil {
		return err
	}
	if o.Share && o.Sharding == ShardingStatic {
		return fmt.Errorf("share: ephemeral sharing works with sharing off or dynamic, not static (each static job fixes its own worker list)")
	}
	return nil
}

// DistributeRequest creates the job if needed and attaches a consumer.
type DistributeRequest struct {
	Name string `cbor:"1,keyasint"`
	// Spec is the pipeline spec's canonical CBOR encoding.
	Spec      []byte     `cbor:"2,keyasint"`
	Options   JobOptions `cbor:"3,keyasint"`
	Consumer  string     `cbor:"4,keyasint"`
	Forwarded bool       `cbor:"5,keyasint,omitempty"`
}

// WorkerInfo is one worker of a job.
type WorkerInfo struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Expired: the worker died; its unfinished splits were lost.
	Expired bool `json:"expired,omitempty"`
}

// JobInfo describes a job, as `feedmesh jobs` shows it.
type JobInfo struct {
	ID          uint64       `json:"id"`
	Name        string       `json:"name"`
	Fingerprint string       `json:"fingerprint"`
	Options     JobOptions   `json:"options"`
	Consumers   []string     `json:"consumers"`
	Workers     []WorkerInfo `json:"workers"`
	NumSplits   int64        `json:"num_splits"`
	Epoch       int64        `json:"epoch"`
	Leased      int64        `json:"splits_leased"`
	Finished    int64        `json:"splits_finished"`
	Lost        int64        `json:"splits_lost"`
	CreatedAt   time.Time    `json:"created_at"`
	// ShareGroup (DYNAMIC jobs with Share) is the hidden job whose split
	// leases all sharing jobs of the dataset use (raftstate share groups);
	// workers lease under it. Leased/Finished/Lost are the group's.
	ShareGroup string `json:"share_group,omitempty"`
	// Share (jobs with Share, in `feedmesh jobs` only) sums the sharing
	// counters the job's workers reported.
	Share *JobShareSummary `json:"share,omitempty"`
	// Rounds (coordinated jobs) is the round schedule and progress.
	Rounds *RoundsInfo `json:"rounds,omitempty"`
}

// RoundsInfo is a coordinated job's round state as Raft holds it.
type RoundsInfo struct {
	// Changes is the round schedule (bucketing.Schedule): round r is
	// served by Workers[r mod n] of the change in force at r.
	Changes []bucketing.Change `json:"changes"`
	// Reached maps consumer index → the highest round it reported.
	Reached map[int]int64 `json:"reached"`
	// Lookahead is how far past its last committed report a consumer may
	// read (raftstate.RoundLookahead).
	Lookahead int64 `json:"lookahead"`
}

// JobRequest names a job (and, for heartbeats and detach, a consumer).
type JobRequest struct {
	Job       string `cbor:"1,keyasint"`
	Consumer  string `cbor:"2,keyasint,omitempty"`
	Forwarded bool   `cbor:"3,keyasint,omitempty"`
	// Report (heartbeats of coordinated consumers): record that consumer
	// Index has reached Round before answering.
	Report bool  `cbor:"4,keyasint,omitempty"`
	Index  int   `cbor:"5,keyasint,omitempty"`
	Round  int64 `cbor:"6,keyasint,omitempty"`
}

// JobGetResponse is a job with its dataset, for workers.
type JobGetResponse struct {
	Job  JobInfo `cbor:"1,keyasint"`
	Spec []byte  `cbor:"2,keyasint"`
}

// LeaseRequest asks the leader for up to N splits of a DYNAMIC job.
// RequestID makes a retry after a lost answer return the same lease.
type LeaseRequest struct {
	Job       string `cbor:"1,keyasint"`
	Worker    string `cbor:"2,keyasint"`
	RequestID uint64 `cbor:"3,keyasint"`
	N         int    `cbor:"4,keyasint"`
	Forwarded bool   `cbor:"5,keyasint,omitempty"`
}

// LeaseResponse carries the leased splits.
type LeaseResponse struct {
	Epoch  int64   `cbor:"1,keyasint"`
	Splits []int64 `cbor:"2,keyasint"`
	// Done: every epoch has been handed out; no more splits will come.
	Done bool `cbor:"3,keyasint"`
}

// FinishRequest reports splits a worker has read completely.
type FinishRequest struct {
	Job       string  `cbor:"1,keyasint"`
	Worker    string  `cbor:"2,keyasint"`
	Epoch     int64   `cbor:"3,keyasint"`
	Splits    []int64 `cbor:"4,keyasint"`
	Forwarded bool    `cbor:"5,keyasint,omitempty"`
}
