package raftstate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Bounds of the job state. Constants, not config fields: every replica must
// accept or reject a command identically.
const (
	// MaxNameBytes bounds job names, consumer ids, worker ids and dataset
	// fingerprints.
	MaxNameBytes = 256
	// MaxSpecBytes bounds a dataset's encoded pipeline spec.
	MaxSpecBytes = 4 << 20
	// MaxDatasets and MaxJobs bound how many datasets and jobs the state
	// holds at once.
	MaxDatasets = 4096
	MaxJobs     = 4096
	// MaxJobConsumers bounds the consumers attached to one job (and
	// JobOptions.NumConsumers).
	MaxJobConsumers = 4096
	// MaxJobWorkers bounds the workers a job has ever been assigned,
	// expired ones included (and JobOptions.MaxWorkers, StaticWorkers).
	MaxJobWorkers = 4096
	// MaxLeaseSplits is the most splits one LeaseSplits hands out; a larger
	// n is clamped to it.
	MaxLeaseSplits = splits.MaxLease
	// MaxFinishSplits bounds the split ids of one FinishSplits.
	MaxFinishSplits = 1 << 16
	// MaxConsumerTTL and MaxGCAfter bound the job's durations.
	MaxConsumerTTL = 24 * time.Hour
	MaxGCAfter     = 30 * 24 * time.Hour
	// MaxFailureBytes bounds an EndTask's failure; NewEndTask cuts
	// longer ones.
	MaxFailureBytes = 1024
)

// Defaults applied to zero JobOptions fields by CreateJob.
const (
	// DefaultConsumerTTL is the consumer lease when JobOptions.ConsumerTTL
	// is 0. Clients renew (AttachConsumer again) well within it.
	DefaultConsumerTTL = 30 * time.Second
	// DefaultGCAfter is how long a job without consumers lives when
	// JobOptions.GCAfter is 0.
	DefaultGCAfter = 5 * time.Minute
)

// Errors of the job commands; Node.Apply wraps ErrRejected around them, and
// errors.Is finds them through it.
var (
	// ErrUnknownJob: no job of that name (never created, or collected).
	ErrUnknownJob = errors.New("raftstate: unknown job")
	// ErrUnknownDataset: no dataset of that fingerprint was registered.
	ErrUnknownDataset = errors.New("raftstate: unknown dataset")
	// ErrMismatch: a dataset or job of that id exists with different
	// content; the message names the differences.
	ErrMismatch = errors.New("raftstate: exists with different content")
	// ErrLimit: a job's NumConsumers or MaxWorkers, or one of the Max*
	// bounds of the state, would be exceeded.
	ErrLimit = errors.New("raftstate: limit reached")
	// ErrNotAssigned: the worker has no live task for the job: never
	// assigned, or expired since, which is final (NewAssignTask).
	ErrNotAssigned = errors.New("raftstate: worker not assigned to the job")
	// ErrNotDynamic: split leases exist only for DYNAMIC jobs.
	ErrNotDynamic = errors.New("raftstate: job does not use dynamic sharding")
	// ErrJobInUse: GarbageCollectJob on a job with consumers, or before it
	// has been without consumers for its GCAfter.
	ErrJobInUse = errors.New("raftstate: job still in use")
	// ErrDetached: AttachConsumer of a consumer that detached from the job
	// (DetachConsumer v2) within the job's ConsumerTTL: a heartbeat that
	// was still on its way when its consumer left.
	ErrDetached = errors.New("raftstate: consumer detached from the job")
)

// Dataset is a registered pipeline spec.
type Dataset struct {
	// Fingerprint identifies the dataset (pipeline.Spec.Fingerprint).
	Fingerprint string `cbor:"1,keyasint" json:"fingerprint"`
	// Spec is the canonical CBOR of the pipeline spec, opaque here.
	Spec []byte `cbor:"2,keyasint" json:"-"`
	// NumSplits is how many splits the source enumerates per epoch.
	NumSplits int64 `cbor:"3,keyasint" json:"num_splits"`
	// ScaleWorkers is the worker count at which the last autoscaling job
	// of the dataset (ScaleJob) converged (one more when it wanted one the
	// mesh did not have): where the next such job starts (ScaleStart).
	// The state machine's own memory: RegisterDataset does not set it.
	ScaleWorkers int    `cbor:"4,keyasint,omitempty" json:"scale_workers,omitempty"`
	ScaleJob     string `cbor:"5,keyasint,omitempty" json:"scale_job,omitempty"`
}

// JobOptions are a job's options, fixed at CreateJob. Zero fields get
// defaults (see each field); the stored Job holds the normalized values.
type JobOptions struct {
	// Sharding is OFF, DYNAMIC or STATIC.
	Sharding splits.Policy `cbor:"1,keyasint" json:"sharding"`
	// Epochs is how many times the dataset is read: 0 means 1, a negative
	// value means forever (stored as -1).
	Epochs int64 `cbor:"2,keyasint" json:"epochs"`
	// NumConsumers is how many consumers may attach; 0 means any number
	// (up to MaxJobConsumers).
	NumConsumers int `cbor:"3,keyasint" json:"num_consumers"`
	// Share lets the job read from the workers' sliding-window cache shared
	// with other jobs of the same dataset.
	Share bool `cbor:"4,keyasint" json:"share"`
	// Coordinated makes consumers read in rounds (bucketing).
	Coordinated bool `cbor:"5,keyasint" json:"coordinated"`
	// MaxWorkers caps the live workers of the job; 0 means every live
	// worker that asks (up to MaxJobWorkers).
	MaxWorkers int `cbor:"6,keyasint" json:"max_workers"`
	// ConsumerTTL is the consumer lease: a consumer that does not renew it
	// for this long is dropped. 0 means DefaultConsumerTTL.
	ConsumerTTL time.Duration `cbor:"7,keyasint" json:"consumer_ttl"`
	// GCAfter is how long a job lives without consumers before it may be
	// garbage-collected. 0 means DefaultGCAfter.
	GCAfter time.Duration `cbor:"8,keyasint" json:"gc_after"`
	// PadFinalRound (coordinated jobs): at the end of the data, a worker's
	// partial windows are padded out with empty batches so every consumer
	// still gets one; false drops them. Either way every consumer ends at
	// the same round.
	PadFinalRound bool `cbor:"9,keyasint,omitempty" json:"pad_final_round,omitempty"`
	// Compression is how workers compress the job's batches on the wire:
	// "" (none) or a compression's name, "lz4" or "zstd" today
	// (transport/batch implements them and mesh checks the name before it
	// proposes a job). Every consumer of the job asks for it. The state
	// machine checks only the form (validCompressionName): a node must
	// apply a job naming a compression a newer node added exactly as that
	// node does.
	Compression string `cbor:"10,keyasint,omitempty" json:"compression,omitempty"`
	// Delivery is what a DYNAMIC job guarantees when a worker dies:
	// DeliveryExactlyOnce (its splits run again, skipping what consumers
	// received) or "" (at-most-once: its splits are lost). "" is also
	// every job of a log written before exactly-once existed; the proposer
	// (mesh) chooses the default. Exactly-once needs DYNAMIC sharding
	// without sharing or coordinated reads.
	Delivery string `cbor:"11,keyasint,omitempty" json:"delivery,omitempty"`
	// Autoscale: Job.Scale decides how many workers the job gets (DYNAMIC
	// without Share or Coordinated; autoscale.go).
	Autoscale bool `cbor:"12,keyasint,omitempty" json:"autoscale,omitempty"`
	// AutoscaleThreshold, AutoscaleRevisit and AutoscalePause tune the
	// policy's Threshold, RevisitEvery and PauseMetrics (0: Cachew's
	// value; a pause of -1: none). Only with Autoscale.
	AutoscaleThreshold float64 `cbor:"13,keyasint,omitempty" json:"autoscale_threshold,omitempty"`
	AutoscaleRevisit   int     `cbor:"14,keyasint,omitempty" json:"autoscale_revisit,omitempty"`
	AutoscalePause     int     `cbor:"15,keyasint,omitempty" json:"autoscale_pause,omitempty"`
	// OffloadBoundary > 0 cuts the pipeline after that many ops (a partial
	// offload): the workers run the source and ops [0, OffloadBoundary)
	// and ship single elements, which the consumers finish
	// (pipeline.OpenSuffix). Exactly-once DYNAMIC jobs only: the elements'
	// provenance seeds the consumers' random ops. The proposer checks the
	// cut against the spec (pipeline.Spec.CheckCut).
	OffloadBoundary int `cbor:"16,keyasint,omitempty" json:"offload_boundary,omitempty"`
	// CountLoss (an at-most-once DYNAMIC job without share or coordinated
	// reads): the job keeps exactly-once's bookkeeping to count exactly
	// the elements a dead worker's splits lose (splits/census.go); its
	// splits are still never delivered again. The proposer (mesh) sets it
	// for every such job whose pipeline allows it (no take or skip); a
	// job without it, or of a log from before it, counts its loss in
	// splits only.
	CountLoss bool `cbor:"17,keyasint,omitempty" json:"count_loss,omitempty"`
}

// MaxOffloadBoundary bounds JobOptions.OffloadBoundary.
const MaxOffloadBoundary = 1024

// Delivery names (JobOptions.Delivery).
const (
	DeliveryExactlyOnce = "exactly-once"
	DeliveryAtMostOnce  = "at-most-once" // stored as ""
)

// maxCompressionName bounds JobOptions.Compression.
const maxCompressionName = 16

// validCompressionName reports whether s is "" or a lowercase name of
// letters and digits, at most maxCompressionName bytes, other than "none"
// (stored as "").
func validCompressionName(s string) bool {
	if len(s) > maxCompressionName || s == "none" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// Normalized returns o with its defaults filled in, as CreateJob stores it.
func (o JobOptions) Normalized() JobOptions {
	switch {
	case o.Epochs == 0:
		o.Epochs = 1
	case o.Epochs < 0:
		o.Epochs = -1
	}
	if o.ConsumerTTL == 0 {
		o.ConsumerTTL = DefaultConsumerTTL
	}
	if o.GCAfter == 0 {
		o.GCAfter = DefaultGCAfter
	}
	if o.Delivery == DeliveryAtMostOnce {
		o.Delivery = ""
	}
	return o
}

// validate checks normalized options.
func (o JobOptions) validate() error {
	var errs []string
	if !o.Sharding.Valid() {
		errs = append(errs, fmt.Sprintf("sharding %v", o.Sharding))
	}
	if o.Epochs == 0 || o.Epochs < -1 || o.Epochs > jobspec.MaxEpochs {
		errs = append(errs, fmt.Sprintf("epochs %d (want -1 or 1..%d)", o.Epochs, jobspec.MaxEpochs))
	}
	if o.NumConsumers < 0 || o.NumConsumers > MaxJobConsumers {
		errs = append(errs, fmt.Sprintf("num_consumers %d (want 0..%d)", o.NumConsumers, MaxJobConsumers))
	}
	if o.MaxWorkers < 0 || o.MaxWorkers > MaxJobWorkers {
		errs = append(errs, fmt.Sprintf("max_workers %d (want 0..%d)", o.MaxWorkers, MaxJobWorkers))
	}
	if o.ConsumerTTL <= 0 || o.ConsumerTTL > MaxConsumerTTL {
		errs = append(errs, fmt.Sprintf("consumer_ttl %v (want up to %v)", o.ConsumerTTL, MaxConsumerTTL))
	}
	if o.GCAfter <= 0 || o.GCAfter > MaxGCAfter {
		errs = append(errs, fmt.Sprintf("gc_after %v (want up to %v)", o.GCAfter, MaxGCAfter))
	}
	if !validCompressionName(o.Compression) {
		errs = append(errs, fmt.Sprintf("compression %q (want a lowercase name, or empty for none)", o.Compression))
	}
	switch {
	case o.Delivery == "":
	case o.Delivery != DeliveryExactlyOnce:
		errs = append(errs, fmt.Sprintf("delivery %q (want %s or %s)", o.Delivery, DeliveryExactlyOnce, DeliveryAtMostOnce))
	case o.Sharding != splits.Dynamic || o.Share:
		errs = append(errs, fmt.Sprintf("delivery %s needs sharding=dynamic without share (have sharding=%v share=%v)", o.Delivery, o.Sharding, o.Share))
	}
	if o.CountLoss && (o.Delivery != "" || o.Sharding != splits.Dynamic || o.Share || o.Coordinated) {
		errs = append(errs, fmt.Sprintf("count_loss needs delivery %s, sharding=dynamic, without share or coordinated reads (have delivery=%s sharding=%v share=%v coordinated=%v)",
			DeliveryAtMostOnce, deliveryName(o.Delivery), o.Sharding, o.Share, o.Coordinated))
	}
	if o.Autoscale && (o.Sharding != splits.Dynamic || o.Share || o.Coordinated) {
		errs = append(errs, fmt.Sprintf("autoscale needs sharding=dynamic without share or coordinated reads (have sharding=%v share=%v coordinated=%v)", o.Sharding, o.Share, o.Coordinated))
	}
	if err := o.validateScaleTuning(); err != nil {
		errs = append(errs, err.Error())
	}
	switch {
	case o.OffloadBoundary < 0 || o.OffloadBoundary > MaxOffloadBoundary:
		errs = append(errs, fmt.Sprintf("offload_boundary %d (want 0..%d)", o.OffloadBoundary, MaxOffloadBoundary))
	case o.OffloadBoundary > 0 && (o.Delivery != DeliveryExactlyOnce || o.Coordinated):
		errs = append(errs, fmt.Sprintf("offload_boundary needs delivery %s without coordinated reads (have delivery=%s coordinated=%v)", DeliveryExactlyOnce, deliveryName(o.Delivery), o.Coordinated))
	}
	errs = append(errs, o.validateCoordinated()...)
	if len(errs) > 0 {
		return fmt.Errorf("%w: job options: %s", ErrInvalidCommand, strings.Join(errs, ", "))
	}
	return nil
}

// diff names each option that differs, as "name=have, not want".
func (o JobOptions) diff(want JobOptions) []string {
	var d []string
	add := func(name string, have, want any) {
		if have != want {
			d = append(d, fmt.Sprintf("%s=%v, not %v", name, have, want))
		}
	}
	add("sharding", o.Sharding, want.Sharding)
	add("epochs", o.Epochs, want.Epochs)
	add("num_consumers", o.NumConsumers, want.NumConsumers)
	add("share", o.Share, want.Share)
	add("coordinated", o.Coordinated, want.Coordinated)
	add("max_workers", o.MaxWorkers, want.MaxWorkers)
	add("consumer_ttl", o.ConsumerTTL, want.ConsumerTTL)
	add("gc_after", o.GCAfter, want.GCAfter)
	add("pad_final_round", o.PadFinalRound, want.PadFinalRound)
	add("compression", compressionName(o.Compression), compressionName(want.Compression))
	add("delivery", deliveryName(o.Delivery), deliveryName(want.Delivery))
	add("autoscale", o.Autoscale, want.Autoscale)
	add("autoscale_threshold", o.AutoscaleThreshold, want.AutoscaleThreshold)
	add("autoscale_revisit", o.AutoscaleRevisit, want.AutoscaleRevisit)
	add("autoscale_pause", o.AutoscalePause, want.AutoscalePause)
	add("offload_boundary", o.OffloadBoundary, want.OffloadBoundary)
	add("count_loss", o.CountLoss, want.CountLoss)
	return d
}

// WorkerState is a worker's task for a job.
type WorkerState struct {
	// Since is when the task was (last) assigned, Unix nanoseconds.
	Since int64 `cbor:"1,keyasint" json:"since"`
	// Expired: the worker was declared dead; its DYNAMIC leases were lost.
	// It is out of the job for good (AssignTask v2 refuses it; v1, in old
	// logs, revived it), unless a newer process of its node rejoins a
	// DYNAMIC job (NewRejoinTask).
	Expired bool `cbor:"2,keyasint" json:"expired"`
	// Incarnation is the worker process's incarnation that leased last
	// (LeaseSplits v2; 0 before any v2 lease). A lease from a newer
	// incarnation means the worker restarted before it was declared dead:
	// the leases of the old process are lost then (see NewLeaseSplitsAs).
	Incarnation uint64 `cbor:"3,keyasint,omitempty" json:"incarnation,omitempty"`
	// Ended: the worker's task of the job has ended (EndTask): its data
	// ended, or it failed.
	Ended bool `cbor:"4,keyasint,omitempty" json:"ended,omitempty"`
	// Drained: the worker's process (Incarnation) shut down gracefully
	// and drained its task (NewDrainTask): it held nothing of the job
	// when it left, so a later process of the same node rejoins the job
	// (NewRejoinTask), expired or not, instead of being out of it for good.
	Drained bool `cbor:"5,keyasint,omitempty" json:"drained,omitempty"`
	// Released: the job gave the worker back (AllocateJob, release.go):
	// its leases are refused, and it drains. Once Drained too, its node is
	// free, and the job takes it back only through NewRejoinTask.
	Released bool `cbor:"6,keyasint,omitempty" json:"released,omitempty"`
}

// JobFailure is why a job failed (EndTask with a failure): the first
// failure a worker reported. A failed job keeps running on its other workers, but its
// consumers stop with the error, and `feedmesh jobs` shows it failed.
type JobFailure struct {
	// Worker is the worker whose task failed.
	Worker string `cbor:"1,keyasint" json:"worker"`
	// Reason is the task's error, at most MaxFailureBytes.
	Reason string `cbor:"2,keyasint" json:"reason"`
	// At is the EndTask's At, Unix nanoseconds.
	At int64 `cbor:"3,keyasint" json:"at"`
}

// Job is a named run of a dataset, as stored in the state.
type Job struct {
	// ID is the log index of the CreateJob that made the job: unique over
	// the life of the cluster, so a job re-created under the same name
	// after garbage collection has a new ID.
	ID uint64 `cbor:"1,keyasint" json:"id"`
	// Name is the job's name (the key of State.Jobs).
	Name string `cbor:"2,keyasint" json:"name"`
	// Fingerprint is the job's dataset.
	Fingerprint string `cbor:"3,keyasint" json:"fingerprint"`
	// NumSplits is the dataset's, copied at CreateJob.
	NumSplits int64 `cbor:"4,keyasint" json:"num_splits"`
	// Options are normalized (JobOptions.Normalized).
	Options JobOptions `cbor:"5,keyasint" json:"options"`
	// CreatedAt is the CreateJob's At, Unix nanoseconds.
	CreatedAt int64 `cbor:"6,keyasint" json:"created_at"`
	// Consumers maps consumer id → lease expiry, Unix nanoseconds.
	Consumers map[string]int64 `cbor:"7,keyasint" json:"consumers"`
	// Workers are the workers ever assigned (until the job is collected).
	Workers map[string]WorkerState `cbor:"8,keyasint" json:"workers"`
	// StaticWorkers (STATIC only) is the sorted worker list agreed at
	// CreateJob: split i goes to StaticWorkers[i mod n].
	StaticWorkers []string `cbor:"9,keyasint" json:"static_workers,omitempty"`
	// Dynamic (DYNAMIC only) is the split lease bookkeeping.
	Dynamic *splits.DynamicState `cbor:"10,keyasint" json:"dynamic,omitempty"`
	// NoConsumersSince is when the job last lost its last consumer (or was
	// created without one), Unix nanoseconds; 0 while any is attached.
	NoConsumersSince int64 `cbor:"11,keyasint" json:"no_consumers_since"`
	// ShareGroup (DYNAMIC jobs with Share only) names the share group whose
	// split leases this job reads: see sharegroup.go. Empty otherwise.
	ShareGroup string `cbor:"12,keyasint,omitempty" json:"share_group,omitempty"`
	// Group marks a share group: a hidden job that holds the DYNAMIC split
	// leases of every sharing job of one dataset and epoch count. It has no
	// consumers of its own and lives while a job references it.
	Group bool `cbor:"13,keyasint,omitempty" json:"group,omitempty"`
	// Rounds (coordinated jobs only) is the round schedule and consumer
	// progress: see rounds.go.
	Rounds *RoundState `cbor:"14,keyasint,omitempty" json:"rounds,omitempty"`
	// Detached maps consumer id → the At of its DetachConsumer (v2), for
	// the job's ConsumerTTL after it (ExpireConsumers forgets it then; at
	// most MaxJobConsumers, the oldest forgotten first). AttachConsumer
	// refuses these ids (ErrDetached): a detach is final, so a heartbeat
	// that reaches the leader after its consumer's detach cannot attach it
	// again and keep the job alive for a whole ConsumerTTL.
	Detached map[string]int64 `cbor:"15,keyasint,omitempty" json:"detached,omitempty"`
	// Failure is set once a worker reported that its task of the job
	// failed (EndTask); nil while none has. It never changes after that.
	Failure *JobFailure `cbor:"16,keyasint,omitempty" json:"failure,omitempty"`
	// ConsumerMetrics maps an attached consumer to the last metric its
	// heartbeat carried (AttachConsumer v2): its batch time, result
	// queue and stall, what autoscaling follows. A consumer's entry goes
	// with it.
	ConsumerMetrics map[string]ScaleMetric `cbor:"17,keyasint,omitempty" json:"consumer_metrics,omitempty"`
	// Scale (Options.Autoscale) is the autoscaling policy's state: how
	// many workers the job should have, and why.
	Scale *ScaleState `cbor:"18,keyasint,omitempty" json:"scale,omitempty"`
	// Offload is the consumers' offload state (offload.go); nil when
	// none asked.
	Offload *OffloadState `cbor:"40,keyasint,omitempty" json:"offload,omitempty"`
}

// clone returns a deep copy.
func (j *Job) clone() *Job {
	c := *j
	c.Consumers = maps.Clone(j.Consumers)
	c.Detached = maps.Clone(j.Detached)
	c.ConsumerMetrics = maps.Clone(j.ConsumerMetrics)
	c.Workers = maps.Clone(j.Workers)
	c.StaticWorkers = slices.Clone(j.StaticWorkers)
	c.Dynamic = j.Dynamic.Clone()
	c.Rounds = j.Rounds.clone()
	c.Offload = j.Offload.clone()
	if j.Scale != nil {
		sc := *j.Scale
		c.Scale = &sc
	}
	if j.Failure != nil {
		f := *j.Failure
		c.Failure = &f
	}
	return &c
}

// servingWorkers counts the assigned workers neither expired nor drained.
func (j *Job) servingWorkers() int {
	n := 0
	for _, st := range j.Workers {
		if !st.Expired && !st.Drained {
			n++
		}
	}
	return n
}

// LiveWorkers returns the assigned workers that are not expired, sorted:
// nodes only, a consumer's local worker (offload.go) does not count
// toward max_workers.
func (j *Job) LiveWorkers() []string {
	var ws []string
	for w, st := range j.Workers {
		if _, local := jobspec.LocalWorkerOf(w); !st.Expired && !local {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	return ws
}

// ConsumerIDs returns the attached consumers, sorted.
func (j *Job) ConsumerIDs() []string { return slices.Sorted(maps.Keys(j.Consumers)) }

// GCDue reports whether the job may be garbage-collected at now (Unix
// nanoseconds): no consumer is attached and none has been for GCAfter. The
// leader uses it to decide when to propose GarbageCollectJob.
func (j *Job) GCDue(now int64) bool {
	return len(j.Consumers) == 0 && now >= addSat(j.NoConsumersSince, j.Options.GCAfter)
}

// StaticSplits returns the splits worker reads in a STATIC job (nil for
// other policies or a worker not in StaticWorkers).
func (j *Job) StaticSplits(worker string) []int64 {
	if j.Options.Sharding != splits.Static {
		return nil
	}
	return splits.StaticAssignment(j.NumSplits, j.StaticWorkers, worker)
}

// JobView is a deep copy of a job for readers outside the FSM, with the
// DYNAMIC progress computed.
type JobView struct {
	Job
	// Progress is the DYNAMIC lease progress; nil for other policies.
	Progress *splits.Progress `json:"progress,omitempty"`
}

func viewOf(j *Job) JobView {
	v := JobView{Job: *j.clone()}
	if j.Dynamic != nil {
		p := j.Dynamic.Progress()
		v.Progress = &p
	}
	return v
}

// Job returns a copy of the named job.
func (s *State) Job(name string) (JobView, bool) {
	j, ok := s.Jobs[name]
	if !ok {
		return JobView{}, false
	}
	return viewOf(j), true
}

// JobList returns copies of every job, sorted by name.
func (s *State) JobList() []JobView {
	out := make([]JobView, 0, len(s.Jobs))
	for _, name := range slices.Sorted(maps.Keys(s.Jobs)) {
		out = append(out, viewOf(s.Jobs[name]))
	}
	return out
}

// Dataset returns a copy of the dataset with that fingerprint.
func (s *State) Dataset(fingerprint string) (Dataset, bool) {
	d, ok := s.Datasets[fingerprint]
	if !ok {
		return Dataset{}, false
	}
	d.Spec = slices.Clone(d.Spec)
	return d, true
}

// checkName validates an id that names a job, consumer, worker or dataset.
func checkName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidCommand, what)
	}
	if len(name) > MaxNameBytes {
		return fmt.Errorf("%w: %s of %d bytes, limit %d", ErrInvalidCommand, what, len(name), MaxNameBytes)
	}
	return nil
}

// addSat adds d to t (Unix nanoseconds), saturating instead of wrapping.
func addSat(t int64, d time.Duration) int64 {
	s := t + int64(d)
	if d > 0 && s < t {
		return 1<<63 - 1
	}
	if d < 0 && s > t {
		return -1 << 63
	}
	return s
}

// timeDiff is a - b as a Duration, for messages.
func timeDiff(a, b int64) time.Duration { return time.Duration(a - b) }

// deliveryName is the name of a stored JobOptions.Delivery.
// JobMismatchError is CreateJob's ErrMismatch for a job of that name
// that exists with other options (or dataset): Diffs name each, the
// job's value first ("offload_boundary=1, not 0"), so that a node can
// answer with them alone, without the Raft command's wrapping.
type JobMismatchError struct {
	Job   string
	Diffs []string
}

func (e *JobMismatchError) Error() string {
	return fmt.Sprintf("%v: job %q exists with %s", ErrMismatch, e.Job, strings.Join(e.Diffs, "; "))
}

func (e *JobMismatchError) Unwrap() error { return ErrMismatch }

func compressionName(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

func deliveryName(d string) string {
	if d == "" {
		return DeliveryAtMostOnce
	}
	return d
}
