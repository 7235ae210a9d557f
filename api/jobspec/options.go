package jobspec

import (
	"errors"
	"fmt"
	"time"
)

// Options describe the job a consumer creates or joins, and the
// consumer's own choices: what a trainer gives (Go's client.JobOptions,
// Python's distribute keywords, `feedmesh read`'s flags), and what
// travels in a distribute request (api.DistributeRequest; api.JobOptions
// is this type). Zero fields ask for the defaults.
//
// Options are raw: Normalize fills the defaults, checks every rule, and
// returns them as a Normalized, whose job part (Job) is what the cluster
// stores and whose consumer part (Consumer) stays with the consumer. Two
// consumers that name the same job must ask for the same job options.
//
// The CBOR keys are the wire's: never renumber one; a new option takes a
// new key (and raises Schema: see Job.Schema).
type Options struct {
	// Name identifies the job: trainers that give the same name join the
	// same job and share its data (each batch goes to one of them).
	// Required.
	Name string `cbor:"1,keyasint,omitempty" json:"name,omitempty"`
	// Sharding: see Sharding. Default Off (Dynamic for Coordinated).
	Sharding Sharding `cbor:"2,keyasint" json:"sharding"`
	// Epochs is how many passes over the dataset the job makes. Default 1.
	// (A job of an older log may repeat for ever: -1.)
	Epochs int64 `cbor:"3,keyasint" json:"epochs"`
	// NumConsumers, if set, limits how many consumers may attach (and is
	// required for Coordinated: the consumers of each round).
	NumConsumers int `cbor:"4,keyasint,omitempty" json:"num_consumers,omitempty"`
	// MaxWorkers caps the workers serving the job: with Workers auto, the
	// most the cluster may give it; otherwise the fixed count (Workers n
	// sets it to n). 0: no cap (auto), every live node (all).
	MaxWorkers int `cbor:"5,keyasint,omitempty" json:"max_workers,omitempty"`
	// ConsumerTTL: a consumer that misses heartbeats this long is dropped.
	// Default 30 s.
	ConsumerTTL time.Duration `cbor:"6,keyasint" json:"consumer_ttl"`
	// GCAfter: the job is deleted when no consumer has been attached this
	// long. Default 1 min.
	GCAfter time.Duration `cbor:"7,keyasint" json:"gc_after"`
	// Share opts into ephemeral sharing: jobs with different names but the
	// same dataset, sharding (off or dynamic) and epochs that all set Share
	// share one production per worker, so a sweep of k jobs costs the
	// workers about one job's preprocessing. Each job still reads every
	// batch (they are not divided among the jobs), as long as it keeps up:
	// a job that falls more than the worker's share window behind the
	// fastest skips the batches evicted meanwhile instead of slowing the
	// others (Stats().Share.EvictedBeforeRead counts them). A job that
	// starts while others are half-way joins at the oldest batch the
	// window still holds.
	Share bool `cbor:"8,keyasint,omitempty" json:"share,omitempty"`
	// Coordinated makes the NumConsumers consumers of the job (trainer
	// ranks of one synchronous step) read in rounds: in round r each gets
	// a batch of the same length bucket, all from the one worker that
	// serves round r (so a step waits on no rank with a much longer
	// batch). The spec must end in bucket_by_sequence_length;
	// NumConsumers (m) is required; sharding defaults to dynamic (the only
	// one allowed: workers read disjoint splits). Each consumer gives its
	// ConsumerIndex in [0, m). The client's Batch.Round says which round,
	// bucket and padded sizes each batch had.
	Coordinated bool `cbor:"9,keyasint,omitempty" json:"coordinated,omitempty"`
	// ConsumerIndex (coordinated jobs) is this consumer's index in [0,
	// NumConsumers): it gets batch ConsumerIndex of every round. A consumer
	// that restarts with the same index resumes where it left off. It is
	// the consumer's, not the job's (Consumer.Index).
	ConsumerIndex int `cbor:"10,keyasint,omitempty" json:"consumer_index,omitempty"`
	// PadFinalRound (coordinated jobs): at the end of the data each
	// worker's last partial windows are padded out with empty (zero-row)
	// batches; false drops them (at-most-once only: exactly-once jobs always
	// pad, or the elements would be lost). Every consumer ends at the same
	// round either way.
	PadFinalRound bool `cbor:"11,keyasint,omitempty" json:"pad_final_round,omitempty"`
	// Compression has the workers compress the job's batches on the wire:
	// "lz4" (cheap to decompress) or "zstd" (smaller, but compressing costs
	// the worker ~3× lz4's CPU); "" or "none" (the default) sends them as
	// they are. For links slower than the workers' CPUs: on bucketed token
	// batches, already unpadded and narrowed by default, lz4 saves ~7% of
	// the bytes and zstd ~20% (on a 200 Mbit/s link: 2.56× gRPC+TLS's
	// batches/s uncompressed, 2.75× lz4, 3.19× zstd; docs/benchmarks); other
	// data (features, embeddings) may compress better. Batches that do not
	// compress (random bytes, encoded images) go uncompressed either way.
	// Part of the job's options: every consumer of the job gets the same,
	// and a worker grants a stream only its job's compression. Normalize
	// checks the name's form; which names exist is transport/batch's
	// (the client and the node check that they have it).
	Compression string `cbor:"12,keyasint,omitempty" json:"compression,omitempty"`
	// Delivery is what a DYNAMIC job guarantees when a node dies:
	// ExactlyOnce (the default for DYNAMIC jobs without Share, coordinated
	// ones included: a dead worker's splits are read again by another,
	// skipping every element a consumer received, so each element of each
	// epoch reaches the job's consumers once) or AtMostOnce (the dead
	// worker's unfinished splits are lost, never repeated; the default,
	// and the only choice, for Share jobs). OFF and STATIC
	// jobs take "" (each worker reads its own splits; see
	// docs/jobs/sharding-and-delivery.md).
	Delivery string `cbor:"13,keyasint,omitempty" json:"delivery,omitempty"`
	// Autoscale is Workers auto as nodes that predate Workers read it
	// (Normalize sets it from Workers; setting it alone still asks for
	// auto).
	Autoscale bool `cbor:"14,keyasint,omitempty" json:"autoscale,omitempty"`
	// Workers is how many nodes serve the job: all (every live node: the
	// default), a fixed count (n, as FixedWorkers(n)), or auto (DYNAMIC
	// jobs without Share or Coordinated: the cluster chooses, after
	// Cachew, from the consumers' batch time and result queue; one worker
	// at first, one more while each improves the batch time by more than
	// 3 %, fewer when the consumers' queue shows the workers outpace the
	// model; MaxWorkers, if set, caps it). Nodes serve at most one
	// autoscaling job while there are enough; see
	// docs/jobs/autoscaling.md.
	Workers Workers `cbor:"15,keyasint,omitempty" json:"workers,omitempty"`
	// AutoscaleThreshold, AutoscaleRevisit and AutoscalePause tune the
	// policy of a job with Workers auto (Cachew's knobs; 0 takes the
	// default, Cachew's value). A metric is the speaking consumer's batch
	// time over 100 batches (Cachew's batch_time).
	//
	// AutoscaleThreshold is the relative batch-time gain a worker must
	// bring to stay, and to make the policy try one more: in (0, 1),
	// default 0.03.
	AutoscaleThreshold float64 `cbor:"16,keyasint,omitempty" json:"autoscale_threshold,omitempty"`
	// AutoscaleRevisit is how many metrics a converged decision stands
	// before the policy tries one worker fewer: default 10.
	AutoscaleRevisit int `cbor:"17,keyasint,omitempty" json:"autoscale_revisit,omitempty"`
	// AutoscalePause is how many metrics are ignored after a worker is
	// removed or the job converges (they straddle the change): default 2;
	// -1 ignores none. After a worker is added, the one metric taken as
	// it starts to serve is ignored whatever the pause.
	AutoscalePause int `cbor:"18,keyasint,omitempty" json:"autoscale_pause,omitempty"`
	// Resume (the consumer's, never on the wire as an option) is a
	// checkpoint (Iterator.Checkpoint) to resume the job from: the job is
	// created again, or joined, without what reached the trainer through
	// the consumer that took it. Exactly-once DYNAMIC jobs only; the
	// dataset, Epochs and Name must be the checkpoint's.
	Resume []byte `cbor:"-" json:"-"`
	// Offload: auto (the default), remote, local, or a fixed local
	// fraction ("0.3"); see OffloadAuto and docs/jobs/offload.md.
	// The consumer's choice (Consumer.Offload).
	Offload string `cbor:"40,keyasint,omitempty" json:"offload,omitempty"`
	// LocalCPUs is the trainer host's CPU budget for a local worker
	// (cores; 0: the spare CPUs the client measures). The consumer's.
	LocalCPUs float64 `cbor:"41,keyasint,omitempty" json:"local_cpus,omitempty"`
	// OffloadBoundary, when > 0, cuts the pipeline after that many ops:
	// the nodes run ops [0, OffloadBoundary) and ship single elements, the
	// client runs the rest (pipeline.Spec.CheckCut says where a cut may
	// go). DYNAMIC exactly-once jobs with offload remote or auto. 0: no
	// cut (each side runs all of it). The job's: every consumer of it runs
	// the same cut.
	OffloadBoundary int `cbor:"42,keyasint,omitempty" json:"offload_boundary,omitempty"`
	// Order, when set, is written into the spec before it is sent
	// (pipeline.Spec.Order): "any" (the default) or "deterministic", the
	// batch sequence a function of the spec and its seed alone, the same
	// at any cluster size (docs/jobs/deterministic-order.md). The spec
	// carries it, so the job's fingerprint covers it and two consumers of
	// a job cannot differ. Seed, when not 0, is written as the spec's
	// Seed (with the epoch, it decides every shuffle). Never on the wire
	// as options (the spec is).
	Order string `cbor:"-" json:"order,omitempty"`
	Seed  uint64 `cbor:"-" json:"seed,omitempty"`
	// ReorderBatches (order deterministic; the consumer's) bounds the
	// consumer's reorder buffer: the batches it holds that arrived before
	// those it must return first. A consumer that would hold more fails,
	// naming the bound. 0: DefaultReorderBatches.
	ReorderBatches int `cbor:"-" json:"reorder_batches,omitempty"`
	// SkipBatches (order deterministic; the consumer's) are ranges
	// [lo, hi) of the consumer's batch sequence over the run (its steps:
	// epoch 0's batches, then epoch 1's, …, as numbered without skips)
	// that it passes over: every other batch is returned, in the same
	// order. At most MaxSkipRanges. A checkpoint records them; a resume
	// that gives none keeps the checkpoint's, one that gives some uses
	// its own.
	SkipBatches [][2]int64 `cbor:"-" json:"skip_batches,omitempty"`
}

// Defaults of the zero Options fields.
const (
	DefaultEpochs      = 1
	DefaultConsumerTTL = 30 * time.Second
	DefaultGCAfter     = time.Minute
	// DefaultReorderBatches is ReorderBatches' default.
	DefaultReorderBatches = 4096
	// MaxReorderBatches bounds ReorderBatches.
	MaxReorderBatches = 1 << 20
	// MaxSkipRanges bounds SkipBatches.
	MaxSkipRanges = 16
)

// Normalize fills o's defaults and checks every rule of a job and of its
// consumer, errors naming the field. It is the one place options are
// normalized: the client calls it before it sends (and sends
// Normalized.Options), the node again when it takes the request (the
// trust boundary), and the state machine stores the Job it returns.
// Normalize(n.Options()) is n (but for Consumer.WorkersUnset).
func (o Options) Normalize() (Normalized, error) {
	if o.Name == "" {
		return Normalized{}, errors.New("Name is required (trainers that give the same name join the same job)")
	}
	job := o.jobPart()
	job.normalizeJob()
	if err := o.checkComposition(job); err != nil {
		return Normalized{}, err
	}
	if err := job.checkRequest(); err != nil {
		return Normalized{}, err
	}
	if err := job.checkJob(); err != nil {
		return Normalized{}, err
	}
	c, err := newConsumer(o, job)
	if err != nil {
		return Normalized{}, err
	}
	return Normalized{name: o.Name, job: Job{o: job}, consumer: c}, nil
}

// jobPart is o without its name and the consumer's fields.
func (o Options) jobPart() Options {
	o.Name, o.ConsumerIndex, o.Resume, o.Offload, o.LocalCPUs = "", 0, nil, "", 0
	o.Order, o.Seed, o.ReorderBatches, o.SkipBatches = "", 0, 0, nil
	return o
}

// normalizeJob fills the job's defaults and puts its names in their
// canonical form. It is idempotent.
func (o *Options) normalizeJob() {
	o.Sharding = Sharding(canonical(string(o.Sharding)))
	if o.Sharding == "" {
		o.Sharding = Off
		if o.Coordinated {
			o.Sharding = Dynamic
		}
	}
	o.Delivery = canonical(o.Delivery)
	if o.Delivery == "" && o.Sharding == Dynamic {
		o.Delivery = ExactlyOnce
		if o.Share {
			o.Delivery = AtMostOnce
		}
	}
	if o.Epochs == 0 {
		o.Epochs = DefaultEpochs
	}
	if o.ConsumerTTL == 0 {
		o.ConsumerTTL = DefaultConsumerTTL
	}
	if o.GCAfter == 0 {
		o.GCAfter = DefaultGCAfter
	}
	if o.Compression = canonical(o.Compression); o.Compression == "none" {
		o.Compression = ""
	}
	o.withWorkerDefaults()
}

// checkRequest checks what a new request may not ask for, although a
// stored job of an older log may hold it (checkJob allows it): repeating
// for ever, and sharing a STATIC job.
func (o Options) checkRequest() error {
	if o.Epochs < 1 {
		return fmt.Errorf("epochs: must be >= 1, got %d", o.Epochs)
	}
	if o.Share && o.Sharding == Static {
		return fmt.Errorf("share: ephemeral sharing works with sharding off or dynamic, not static (each static job fixes its own worker list)")
	}
	return nil
}

// checkJob checks the job part of normalized options against the rules
// every stored job meets: what the state machine has always accepted.
// Decoding a Job checks them too, and the state machine applies CreateJob
// v6 with them, so they are part of the Raft log's format: a change here
// is a new CreateJob version (internal/fsm), never an edit of what v6
// accepts.
func (o Options) checkJob() error {
	switch o.Sharding {
	case Off, Dynamic, Static:
	default:
		return fmt.Errorf("sharding: %q is not off, dynamic or static", o.Sharding)
	}
	switch {
	case o.Epochs != -1 && (o.Epochs < 1 || o.Epochs > MaxEpochs):
		return fmt.Errorf("epochs: %d: want 1..%d", o.Epochs, MaxEpochs)
	case o.NumConsumers < 0 || o.NumConsumers > MaxJobConsumers:
		return fmt.Errorf("num_consumers %d: want 0 (any number) up to %d", o.NumConsumers, MaxJobConsumers)
	case o.MaxWorkers < 0 || o.MaxWorkers > MaxJobWorkers:
		return fmt.Errorf("max_workers %d: want 0 (no cap) up to %d", o.MaxWorkers, MaxJobWorkers)
	case o.ConsumerTTL <= 0 || o.ConsumerTTL > MaxConsumerTTL:
		return fmt.Errorf("consumer_ttl %v: want more than 0 up to %v (0: the default, %v)", o.ConsumerTTL, MaxConsumerTTL, DefaultConsumerTTL)
	case o.GCAfter <= 0 || o.GCAfter > MaxGCAfter:
		return fmt.Errorf("gc_after %v: want more than 0 up to %v (0: the default, %v)", o.GCAfter, MaxGCAfter, DefaultGCAfter)
	case !ValidCompressionName(o.Compression):
		return fmt.Errorf("compression %q: want none or a compression's name (lz4, zstd): lowercase letters and digits, at most %d bytes", o.Compression, MaxCompressionName)
	}
	if err := o.checkCoordinated(); err != nil {
		return err
	}
	switch {
	case o.Delivery != "" && o.Delivery != ExactlyOnce && o.Delivery != AtMostOnce:
		return fmt.Errorf("delivery: %q is not exactly-once or at-most-once", o.Delivery)
	case o.Delivery != "" && o.Sharding != Dynamic:
		return fmt.Errorf("delivery %s: only for sharding dynamic (with sharding %s each worker reads its own splits; see docs/jobs/sharding-and-delivery.md)", o.Delivery, o.Sharding)
	case o.Delivery == ExactlyOnce && o.Share:
		return fmt.Errorf("delivery exactly-once: not yet with share (use at-most-once)")
	}
	if err := o.checkWorkers(); err != nil {
		return err
	}
	switch {
	case o.OffloadBoundary < 0 || o.OffloadBoundary > MaxOffloadBoundary:
		return fmt.Errorf("offload_boundary %d: want 0 (no cut) or the number of ops the nodes run, up to %d", o.OffloadBoundary, MaxOffloadBoundary)
	case o.OffloadBoundary > 0 && (o.Sharding != Dynamic || o.Share || o.Coordinated):
		return fmt.Errorf("offload_boundary: only for sharding dynamic without share or coordinated reads")
	case o.OffloadBoundary > 0 && o.Delivery != ExactlyOnce:
		return fmt.Errorf("offload_boundary %d: needs delivery %s (the consumer seeds the ops after the cut from each element's provenance, which exactly-once carries)", o.OffloadBoundary, ExactlyOnce)
	}
	return nil
}

// checkCoordinated checks the options of coordinated reads.
func (o Options) checkCoordinated() error {
	switch {
	case !o.Coordinated && o.PadFinalRound:
		return fmt.Errorf("pad_final_round: only for coordinated jobs")
	case !o.Coordinated:
		return nil
	case o.Sharding != Dynamic:
		return fmt.Errorf("coordinated: needs sharding dynamic (workers read disjoint splits), not %s", o.Sharding)
	case o.NumConsumers < 1 || o.NumConsumers > MaxRoundConsumers:
		return fmt.Errorf("NumConsumers: coordinated reads need the number of consumers of each round, 1..%d, got %d", MaxRoundConsumers, o.NumConsumers)
	case o.Share:
		return fmt.Errorf("coordinated: cannot be combined with share")
	}
	return nil
}

// autoscalable reports whether a job of these options can autoscale:
// DYNAMIC sharding (splits leased first-come-first-served, so any number
// of workers reads each element once) without Share (whose workers each
// produce for every sharing job) or Coordinated reads (whose round
// rotation is agreed per worker).
func (o Options) autoscalable() bool {
	return o.Sharding == Dynamic && !o.Share && !o.Coordinated
}

// withWorkerDefaults fills Workers from the older fields, or the default,
// and the older fields from Workers (Autoscale for auto, MaxWorkers for a
// count), so that a node that reads only the older fields does the same.
// Sharding must be filled already.
func (o *Options) withWorkerDefaults() {
	o.Workers = Workers(canonical(string(o.Workers)))
	switch {
	case o.Workers != "":
	case o.Autoscale:
		o.Workers = AutoWorkers
	case o.MaxWorkers > 0:
		o.Workers = FixedWorkers(o.MaxWorkers)
	case o.autoscalable() && (o.AutoscaleThreshold != 0 || o.AutoscaleRevisit != 0 || o.AutoscalePause != 0):
		o.Workers = AutoWorkers // its knobs alone ask for it
	default:
		// Every job's default (issue 42: auto, the default of DYNAMIC jobs
		// before, starts on one worker and read a plain job of a few
		// seconds' work at a fraction of what every node reads).
		o.Workers = AllWorkers
	}
	switch n := o.Workers.Count(); {
	case o.Workers == AutoWorkers:
		o.Autoscale = true
	case n > 0 && o.MaxWorkers == 0:
		o.MaxWorkers = n
	}
}

// checkWorkers rejects a Workers choice the job cannot have, or one
// that contradicts MaxWorkers or Autoscale, and autoscaling knobs out of
// range or on a job that does not autoscale.
func (o Options) checkWorkers() error {
	n, fixed, err := o.Workers.count()
	if err != nil {
		return err
	}
	switch {
	case o.Workers == AutoWorkers && !o.autoscalable():
		what := fmt.Sprintf("sharding %s", o.Sharding)
		switch {
		case o.Coordinated:
			what = "coordinated reads (every worker has its turn in the round rotation)"
		case o.Share:
			what = "share (each worker produces for every sharing job)"
		case o.Sharding == Off:
			what = "sharding off (each worker reads the whole dataset, so the count changes the data)"
		case o.Sharding == Static:
			what = "sharding static (the worker list is fixed at the job's start)"
		}
		return fmt.Errorf("workers auto: only DYNAMIC jobs without share or coordinated reads autoscale; a job with %s takes workers all or a fixed count", what)
	case o.Autoscale && o.Workers != AutoWorkers:
		return fmt.Errorf("workers %s: contradicts autoscale (which is workers auto)", o.Workers)
	case o.Workers == AllWorkers && o.MaxWorkers > 0:
		return fmt.Errorf("workers all: contradicts max_workers %d (every node serves the job; use workers %d for a fixed count)", o.MaxWorkers, o.MaxWorkers)
	case fixed && o.MaxWorkers != n:
		return fmt.Errorf("workers %d: contradicts max_workers %d (set one of them)", n, o.MaxWorkers)
	}
	switch {
	case o.AutoscaleThreshold == 0 && o.AutoscaleRevisit == 0 && o.AutoscalePause == 0:
		return nil
	case !o.Autoscale:
		return fmt.Errorf("autoscale_threshold, autoscale_revisit, autoscale_pause: tune workers auto, not workers %s", o.Workers)
	case !(o.AutoscaleThreshold >= 0 && o.AutoscaleThreshold < 1):
		return fmt.Errorf("autoscale_threshold %v: want a relative batch-time gain in (0, 1), e.g. 0.03 (0: the default)", o.AutoscaleThreshold)
	case o.AutoscaleRevisit < 0 || o.AutoscaleRevisit > MaxAutoscaleMetrics:
		return fmt.Errorf("autoscale_revisit %d: want 1..%d metrics (0: the default, 10)", o.AutoscaleRevisit, MaxAutoscaleMetrics)
	case o.AutoscalePause < -1 || o.AutoscalePause > MaxAutoscaleMetrics:
		return fmt.Errorf("autoscale_pause %d: want 1..%d metrics, or -1 for none (0: the default, 2)", o.AutoscalePause, MaxAutoscaleMetrics)
	}
	return nil
}

// ValidCompressionName reports whether s is "" (none) or a lowercase name
// of letters and digits, at most MaxCompressionName bytes, other than
// "none" (normalized to "").
func ValidCompressionName(s string) bool {
	if len(s) > MaxCompressionName || s == "none" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
