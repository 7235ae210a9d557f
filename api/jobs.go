package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/api/rounds"
	"github.com/feedmesh/feedmesh/ranges"
)

// JobOptions are the options of the job a client creates or joins, and
// the client's own choices in it: jobspec.Options, the one schema of a
// job's options (an alias, so that the messages below read as the wire
// does). A node normalizes them (Normalize) when it takes a request; what
// it stores and shows (JobInfo.Options) is the job's part, normalized.
type JobOptions = jobspec.Options

// DistributeRequest creates the job if needed and attaches a consumer.
type DistributeRequest struct {
	// Spec is the pipeline spec's canonical CBOR encoding.
	Spec []byte `cbor:"1,keyasint"`
	// Options name the job (Options.Name) and describe it.
	Options   JobOptions `cbor:"2,keyasint"`
	Consumer  string     `cbor:"3,keyasint"`
	Forwarded bool       `cbor:"4,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// Resume (an exactly-once DYNAMIC job resumed from a checkpoint) is
	// the consumer's checkpoint, decoded and checked by the client.
	Resume *ResumePart `cbor:"5,keyasint,omitempty"`
}

// ResumePart is one consumer's checkpoint as the cluster takes it
// (DistributeRequest.Resume): what reached the trainer through consumer
// Part of job From, which had Want consumers then.
type ResumePart struct {
	From      uint64           `cbor:"1,keyasint"`
	Part      string           `cbor:"2,keyasint"`
	Want      int              `cbor:"3,keyasint"`
	Delivered ranges.Delivered `cbor:"4,keyasint"`
	// MAC (checkpoint format 2) is the checkpoint's MAC (CheckpointMAC),
	// under the key of consumer Part's capability: the cluster, which
	// holds the job's key, recomputes it and refuses a checkpoint whose
	// MAC differs (forged, another tenant's, another job's) or is absent
	// (docs/operating/security.md, "Capabilities and checkpoint MACs").
	MAC []byte `cbor:"5,keyasint,omitempty"`
}

// WorkerInfo is one worker of a job.
type WorkerInfo struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Expired: the worker was declared dead; its unfinished splits were
	// lost (at-most-once) or are read again (exactly-once), and a consumer
	// drops it. A newer process of the node rejoins a DYNAMIC job (Since
	// changes); the same process, back from a pause, does not.
	Expired bool `json:"expired,omitempty"`
	// Incarnation identifies the worker's process that leased last (0:
	// none yet). A change means the worker restarted: a consumer of an
	// exactly-once job stops reading the old process's streams and fences
	// it, so that its splits are read again.
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Drained: the worker's process drained its task before a graceful
	// shutdown; it holds nothing of the job. A later process of the node
	// rejoins the job, assigned afresh (Since changes).
	Drained bool `json:"drained,omitempty"`
	// Dismissed: the job's autoscaling gave the worker back; it drains
	// (until Drained too), and the job may take it back later, assigned
	// afresh (Since changes).
	Dismissed bool `json:"released,omitempty"`
	// Held (DYNAMIC jobs) is how many splits the worker holds: leased,
	// or (exactly-once) produced and not yet settled by receipts.
	Held int `json:"held,omitempty"`
	// Since is when the worker was (last) assigned the job, Unix
	// nanoseconds: a consumer that took a drained process's end of data
	// reads from the worker again when it changes.
	Since int64 `json:"since,omitempty"`
}

// JobInfo describes a job, as `feedmesh jobs` shows it.
type JobInfo struct {
	ID          uint64 `json:"id"`
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	// Tenant is the tenant the job is of ("": the default tenant), Owner
	// the principal that created it ("" for a job created before owners
	// were recorded): docs/operating/security.md, "Tenants and
	// permissions".
	Tenant string `json:"tenant,omitempty"`
	Owner  string `json:"owner,omitempty"`
	// Capability is the consumer's capability (api/capability.go), in
	// the answer to the distribute or heartbeat that attached it only:
	// its data streams carry it, and its checkpoints' MACs are keyed by
	// it. Never shown (json "-").
	Capability []byte `cbor:"Capability,omitempty" json:"-"`
	// Options are the job's options as the cluster stores them
	// (jobspec.Job.Options): normalized, with no consumer's choices.
	Options   JobOptions `json:"options"`
	Consumers []string   `json:"consumers"`
	// ConsumerMetrics maps a consumer to the metric of its last heartbeat
	// (absent before its first batch).
	ConsumerMetrics map[string]ConsumerMetrics `json:"consumer_metrics,omitempty"`
	// Scale (Options.Autoscale) is the autoscaling decision: how many
	// workers the job should have, the policy's phase, why, and how many
	// times the count changed.
	Scale     *ScaleInfo   `json:"scale,omitempty"`
	Workers   []WorkerInfo `json:"workers"`
	NumSplits int64        `json:"num_splits"`
	Epoch     int64        `json:"epoch"`
	Leased    int64        `json:"splits_leased"`
	Finished  int64        `json:"splits_finished"`
	// Lost (DYNAMIC jobs) counts the splits lost at most once: leased to
	// a worker that was declared dead, or that restarted, before it
	// reported them finished. Their elements that the worker had not sent
	// are missing from the job's data for good (docs/jobs/sharding-and-delivery.md,
	// "Job state and loss", says what this count does not yet cover).
	Lost int64 `json:"splits_lost"`
	// Exact (exactly-once DYNAMIC jobs, and at-most-once ones that count
	// their loss: Tracked) counts what delivery did.
	Exact *ExactInfo `json:"exactly_once,omitempty"`
	// Tracked: the job's workers and consumers keep exactly-once's
	// bookkeeping (provenance, produced splits, receipts, fences). True
	// for exactly-once DYNAMIC jobs, and for at-most-once DYNAMIC jobs
	// without share or coordinated reads (and without take or skip),
	// which use it to count their loss exactly (ExactInfo.Lost).
	Tracked   bool      `json:"tracked,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// State is the job's state: JobRunning, JobFinished or JobFailed.
	State string `json:"state"`
	// Failure (JobFailed) says which worker's pipeline failed, and how.
	Failure string `json:"failure,omitempty"`
	// ShareGroup (DYNAMIC jobs with Share) is the hidden job whose split
	// leases all sharing jobs of the dataset use (the state machine's share groups);
	// workers lease under it. Leased/Finished/Lost are the group's.
	ShareGroup string `json:"share_group,omitempty"`
	// Share (jobs with Share, in `feedmesh jobs` only) sums the sharing
	// counters the job's workers reported.
	Share *JobShareSummary `json:"share,omitempty"`
	// Rounds (coordinated jobs) is the round schedule and progress.
	Rounds *RoundsInfo `json:"rounds,omitempty"`
	// Autocache lists the pipeline's autocache points with what each
	// does and why (docs/jobs/autocache.md).
	Autocache []AutocacheInfo `json:"autocache,omitempty"`
	// Offload maps a consumer to its offload report (MethodOffload).
	Offload map[string]OffloadReport `json:"offload,omitempty"`
	// RemoteOff: a consumer keeps the nodes off the job (offload local).
	RemoteOff bool `json:"remote_off,omitempty"`
}

// Tracks reports whether the job keeps exactly-once's bookkeeping:
// Tracked, or an exactly-once job as a node that does not set Tracked
// describes it.
func (j JobInfo) Tracks() bool { return j.Tracked || j.Options.Delivery == jobspec.ExactlyOnce }

// ExactInfo is an exactly-once job's delivery counters (JobInfo.Exact).
type ExactInfo struct {
	// Delivered is how many elements consumers have receipted.
	Delivered int64 `json:"delivered"`
	// Requeued is how many splits of dead workers were read again.
	Requeued int64 `json:"requeued"`
	// Orphaned is how many splits of dead workers wait to be read again
	// (for their consumers' fences, or a worker to take them).
	Orphaned int64 `json:"orphaned"`
	// Duplicates: elements receipted twice. 0 unless something is wrong.
	Duplicates int64 `json:"duplicates"`
	// Abandoned: elements that reached no consumer that stayed attached
	// (a consumer left mid-job with them, or they were on their way to it).
	Abandoned int64 `json:"abandoned"`
	// Departures: consumers that left the job while it ran.
	Departures int64 `json:"departures"`
	// Skipped: splits a resumed job did not read, its checkpoints saying
	// they were delivered completely.
	Skipped int64 `json:"skipped,omitempty"`
	// SettledBefore: every element of every epoch before it was delivered.
	SettledBefore int64 `json:"settled_before"`
	// ResumeFrom, ResumeWant, ResumeHave (a job resumed from checkpoints):
	// the job they were taken of, how many the job waits for before it
	// starts, how many are in.
	ResumeFrom uint64 `json:"resume_from,omitempty"`
	ResumeWant int    `json:"resume_want,omitempty"`
	ResumeHave int    `json:"resume_have,omitempty"`
	// AtMostOnce: the job is at-most-once and keeps these counters to
	// count its loss: splits of dead workers are never read again. Lost
	// is how many elements those splits emitted, or would have, that no
	// consumer received (exact once the job is finished:
	// docs/jobs/sharding-and-delivery.md), and Censused how many of them a live worker ran
	// without delivering, to count them.
	AtMostOnce bool  `json:"at_most_once,omitempty"`
	Lost       int64 `json:"lost,omitempty"`
	Censused   int64 `json:"censused,omitempty"`
}

// Job states (JobInfo.State).
const (
	// JobRunning: neither finished nor failed.
	JobRunning = "running"
	// JobFinished: a DYNAMIC job has handed out every split of every epoch
	// and each was finished or lost; an OFF or STATIC job's live workers
	// have all reached the end of their data.
	JobFinished = "finished"
	// JobFailed: a worker's pipeline failed (JobInfo.Failure says why);
	// the job's consumers stop with that error.
	JobFailed = "failed"
)

// ErrVersionMismatch: an answer whose job options are unset, which a node
// never sends (it stores them with their defaults): the other side encodes
// the control API's messages another way, a feedmesh of another release.
var ErrVersionMismatch = errors.New("control API version mismatch")

// CheckJobInfo catches a JobInfo decoded from another release's encoding:
// its options come out zero (the keys differ), which would read as a job
// of zero epochs and end it silently.
func CheckJobInfo(j JobInfo) error {
	if j.Options.Epochs == 0 || j.Options.Sharding == "" {
		return fmt.Errorf("%w: job %q came back with no options (epochs %d, sharding %q): does the cluster mix feedmesh releases? Run one release on every node and client",
			ErrVersionMismatch, j.Name, j.Options.Epochs, j.Options.Sharding)
	}
	return nil
}

// RoundsInfo is a coordinated job's round state as Raft holds it.
type RoundsInfo struct {
	// Changes is the round schedule (rounds.Schedule): round r is
	// served by Workers[r mod n] of the change in force at r.
	Changes []rounds.Change `json:"changes"`
	// Reached maps consumer index → the highest round it reported.
	Reached map[int]int64 `json:"reached"`
	// Lookahead is how far past its last committed report a consumer may
	// read (fsm.RoundLookahead).
	Lookahead int64 `json:"lookahead"`
}

// JobRequest names a job (and, for heartbeats and detach, a consumer).
type JobRequest struct {
	Job       string `cbor:"1,keyasint"`
	Consumer  string `cbor:"2,keyasint,omitempty"`
	Forwarded bool   `cbor:"3,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// Report (heartbeats of coordinated consumers): record that consumer
	// Index has reached Round before answering.
	Report bool  `cbor:"4,keyasint,omitempty"`
	Index  int   `cbor:"5,keyasint,omitempty"`
	Round  int64 `cbor:"6,keyasint,omitempty"`
	// Metrics (heartbeats) is the consumer's latest measure of its
	// training loop, kept by the job (JobInfo.ConsumerMetrics); nil
	// before its first batch.
	Metrics *ConsumerMetrics `cbor:"7,keyasint,omitempty"`
}

// ScaleInfo is a job's autoscaling decision (JobInfo.Scale).
type ScaleInfo struct {
	Workers int    `json:"workers"`
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Changes int64  `json:"changes"`
	// Wanted is the count the job wants (Workers capped by MaxWorkers);
	// Share is how many nodes the leader's allocation gives it, and
	// Allocation why ("" before its first allocation).
	Wanted     int    `json:"wanted"`
	Share      int    `json:"share"`
	Allocation string `json:"allocation,omitempty"`
}

// NodesWanted is how many nodes the jobs would want (as tf.data service's
// optimal_number_of_workers), for an external autoscaler: the sum of what
// the running autoscaling jobs want (ScaleInfo.Wanted: a job waiting for a
// node the mesh does not have counts it), and at least the largest fixed
// count (MaxWorkers) of a running job that does not autoscale. A job that
// takes every node wants no particular count and adds nothing. Above the
// live worker nodes, the mesh would use more.
func NodesWanted(jobs []JobInfo) int {
	sum, fixed := 0, 0
	for _, j := range jobs {
		if j.State != "" && j.State != JobRunning {
			continue
		}
		if j.Scale != nil {
			sum += max(j.Scale.Wanted, 1)
		} else {
			fixed = max(fixed, j.Options.MaxWorkers)
		}
	}
	return max(sum, fixed)
}

// ConsumerMetrics is what a consumer measures of its training loop over
// its last 100 batches (client.Stats): the mean time per batch, the
// batches already buffered when it asked for the next, and the share of
// its time spent waiting for data; and the batches it has received.
type ConsumerMetrics struct {
	BatchTimeSeconds float64 `cbor:"1,keyasint" json:"batch_time_seconds"`
	ResultQueue      float64 `cbor:"2,keyasint" json:"result_queue"`
	Stall            float64 `cbor:"3,keyasint" json:"stall"`
	Batches          int64   `cbor:"4,keyasint" json:"batches"`
	// Workers is how many workers delivered the batches of the window
	// (0: not reported): autoscaling measures a worker it added only once
	// its batches reach the consumer.
	Workers int `cbor:"5,keyasint,omitempty" json:"workers,omitempty"`
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
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// Incarnation identifies the worker's process (its start time): the
	// first lease of a restarted worker makes the leases of its previous
	// process lost (fsm.NewLeaseSplitsAs). 0: not said.
	Incarnation uint64 `cbor:"6,keyasint,omitempty"`
	// JobID is the ID of the job the worker's task runs (0: unchecked): a
	// lease for a job replaced since under its name is refused
	// (ErrNotAssigned).
	JobID uint64 `cbor:"7,keyasint,omitempty"`
	// Held (jobs with an autocache point) are the splits the worker's
	// cache holds for it: the lease hands out those first
	// (splits.DynamicState.LeasePreferring). At most MaxHeldIntervals.
	Held ranges.Set `cbor:"8,keyasint,omitempty"`
	// RunsCensus: the worker, a consumer's local worker, runs a census
	// (at-most-once with a loss count: internal/splits/census.go), so
	// it may be leased one. Nodes always do.
	RunsCensus bool `cbor:"9,keyasint,omitempty"`
}

// MaxHeldIntervals bounds LeaseRequest.Held.
const MaxHeldIntervals = 256

// LeaseResponse carries the leased splits.
type LeaseResponse struct {
	Epoch  int64   `cbor:"1,keyasint"`
	Splits []int64 `cbor:"2,keyasint"`
	// Done: every epoch has been handed out; no more splits will come
	// for the first time (exactly-once: a dead worker's may still come
	// back until Complete).
	Done bool `cbor:"3,keyasint"`
	// Exclude (exactly-once), if not empty, has one entry per split: the
	// element indices consumers already received, not to be sent again.
	Exclude []ranges.Set `cbor:"4,keyasint,omitempty"`
	// Key 5 held Complete, which AllProduced implies; not reused.
	// AllProduced (exactly-once): every split was emitted by a live
	// worker; a worker ends its part (splits.DynamicState.AllProduced).
	AllProduced bool `cbor:"6,keyasint,omitempty"`
	// Cut: the job's offload boundary when the lease was answered (0:
	// none); the worker runs these splits through the ops before it.
	Cut int `cbor:"7,keyasint,omitempty"`
	// Census (at-most-once with a loss count): the splits are dead
	// workers' to run without delivering, reporting what they emit
	// (ProduceRequest), which counts as lost (splits/census.go).
	Census bool `cbor:"8,keyasint,omitempty"`
}

// ProduceRequest (exactly-once) reports splits whose every element a
// worker has emitted, with the indices it emitted.
type ProduceRequest struct {
	Job       string                `cbor:"1,keyasint"`
	Worker    string                `cbor:"2,keyasint"`
	Epoch     int64                 `cbor:"3,keyasint"`
	Splits    []ranges.SplitEmitted `cbor:"4,keyasint"`
	Forwarded bool                  `cbor:"5,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// JobID: as LeaseRequest's.
	JobID uint64 `cbor:"6,keyasint,omitempty"`
}

// Receipt is one split's elements a consumer received.
type Receipt struct {
	Epoch int64      `cbor:"1,keyasint"`
	Split int64      `cbor:"2,keyasint"`
	Got   ranges.Set `cbor:"3,keyasint"`
}

// ReceiptsRequest (exactly-once) reports the elements a consumer received
// since its last report, and the dead workers it has stopped reading
// from (fences: its receipts cover all it got from them).
type ReceiptsRequest struct {
	Job       string    `cbor:"1,keyasint"`
	Consumer  string    `cbor:"2,keyasint"`
	Receipts  []Receipt `cbor:"3,keyasint,omitempty"`
	Fenced    []string  `cbor:"4,keyasint,omitempty"`
	Forwarded bool      `cbor:"5,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// Seq numbers the consumer's reports from 1: one sent again after a
	// failure keeps its number and is applied once.
	Seq uint64 `cbor:"6,keyasint,omitempty"`
}

// EndTaskRequest reports that a worker's task of a job ended
// (MethodEndTask): its data ended (Failure empty), or it failed.
type EndTaskRequest struct {
	Job       string `cbor:"1,keyasint"`
	Worker    string `cbor:"2,keyasint"`
	Failure   string `cbor:"3,keyasint,omitempty"`
	Forwarded bool   `cbor:"4,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
	// JobID: as LeaseRequest's.
	JobID uint64 `cbor:"5,keyasint,omitempty"`
}

// HandBackRequest returns DYNAMIC splits a draining worker leased and has
// not started, for other workers to read. The leader refuses it when no
// other worker would take them; the worker then reads them itself.
type HandBackRequest struct {
	Job       string  `cbor:"1,keyasint"`
	Worker    string  `cbor:"2,keyasint"`
	Epoch     int64   `cbor:"3,keyasint"`
	Splits    []int64 `cbor:"4,keyasint"`
	JobID     uint64  `cbor:"5,keyasint,omitempty"`
	Forwarded bool    `cbor:"6,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
}

// DrainedRequest says that a worker's process drained its task of a
// DYNAMIC job before a graceful shutdown: it holds nothing of the job, and
// a later process of the node rejoins it.
type DrainedRequest struct {
	Job         string `cbor:"1,keyasint"`
	Worker      string `cbor:"2,keyasint"`
	JobID       uint64 `cbor:"3,keyasint,omitempty"`
	Incarnation uint64 `cbor:"4,keyasint,omitempty"`
	Forwarded   bool   `cbor:"5,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
}

// FinishRequest reports splits a worker has read completely.
type FinishRequest struct {
	Job       string  `cbor:"1,keyasint"`
	Worker    string  `cbor:"2,keyasint"`
	Epoch     int64   `cbor:"3,keyasint"`
	Splits    []int64 `cbor:"4,keyasint"`
	Forwarded bool    `cbor:"5,keyasint,omitempty"`
	// Caller is who asked the node that forwarded the request (set by
	// that node only, and trusted from a node only: handlers).
	Caller *Principal `cbor:"40,keyasint,omitempty"`
}
