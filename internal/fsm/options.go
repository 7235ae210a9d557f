package fsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// JobOptions are a job's options as CreateJob v1..v5 carried them, and
// snapshot format 2 stored them: the legacy form, kept to read older logs
// and snapshots (and for tests that write a job's options in the state
// machine's own terms: LegacyCreateJob). A command of those versions is
// checked as it always was (Normalized, validate: an older log replays
// with the same results), then converted once, by stored, to what a job
// holds since CreateJob v6: its jobspec.Job and Job.CountLoss. Zero
// fields get defaults (see each field).
type JobOptions struct {
	// Sharding is OFF, DYNAMIC or STATIC.
	Sharding splits.Policy `cbor:"1,keyasint" json:"sharding"`
	// Epochs is how many times the dataset is read: 0 means 1, a negative
	// value means forever (stored as -1).
	Epochs int64 `cbor:"2,keyasint" json:"epochs"`
	// NumConsumers is how many consumers may attach; 0 means any number
	// (up to 4096).
	NumConsumers int `cbor:"3,keyasint" json:"num_consumers"`
	// Share lets the job read from the workers' sliding-window cache shared
	// with other jobs of the same dataset.
	Share bool `cbor:"4,keyasint" json:"share"`
	// Coordinated makes consumers read in rounds (bucketing).
	Coordinated bool `cbor:"5,keyasint" json:"coordinated"`
	// MaxWorkers caps the live workers of the job; 0 means every live
	// worker that asks (up to 4096).
	MaxWorkers int `cbor:"6,keyasint" json:"max_workers"`
	// ConsumerTTL is the consumer lease: a consumer that does not renew it
	// for this long is dropped. 0 means 30 s.
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

// Delivery names (JobOptions.Delivery).
const (
	DeliveryExactlyOnce = "exactly-once"
	DeliveryAtMostOnce  = "at-most-once" // stored as ""
)

// Normalized returns o with its defaults filled in, as CreateJob stores it.
func (o JobOptions) Normalized() JobOptions {
	switch {
	case o.Epochs == 0:
		o.Epochs = 1
	case o.Epochs < 0:
		o.Epochs = -1
	}
	if o.ConsumerTTL == 0 {
		o.ConsumerTTL = defaultConsumerTTL
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
	if o.NumConsumers < 0 || o.NumConsumers > maxJobConsumers {
		errs = append(errs, fmt.Sprintf("num_consumers %d (want 0..%d)", o.NumConsumers, maxJobConsumers))
	}
	if o.MaxWorkers < 0 || o.MaxWorkers > maxJobWorkers {
		errs = append(errs, fmt.Sprintf("max_workers %d (want 0..%d)", o.MaxWorkers, maxJobWorkers))
	}
	if o.ConsumerTTL <= 0 || o.ConsumerTTL > maxConsumerTTL {
		errs = append(errs, fmt.Sprintf("consumer_ttl %v (want up to %v)", o.ConsumerTTL, maxConsumerTTL))
	}
	if o.GCAfter <= 0 || o.GCAfter > maxGCAfter {
		errs = append(errs, fmt.Sprintf("gc_after %v (want up to %v)", o.GCAfter, maxGCAfter))
	}
	if !jobspec.ValidCompressionName(o.Compression) {
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
	case o.OffloadBoundary < 0 || o.OffloadBoundary > jobspec.MaxOffloadBoundary:
		errs = append(errs, fmt.Sprintf("offload_boundary %d (want 0..%d)", o.OffloadBoundary, jobspec.MaxOffloadBoundary))
	case o.OffloadBoundary > 0 && (o.Delivery != DeliveryExactlyOnce || o.Coordinated):
		errs = append(errs, fmt.Sprintf("offload_boundary needs delivery %s without coordinated reads (have delivery=%s coordinated=%v)", DeliveryExactlyOnce, deliveryName(o.Delivery), o.Coordinated))
	}
	errs = append(errs, o.validateCoordinated()...)
	if len(errs) > 0 {
		return fmt.Errorf("%w: job options: %s", ErrInvalidCommand, strings.Join(errs, ", "))
	}
	return nil
}

// stored converts legacy options, normalized and valid (validate), to
// the job's options as a job holds them since CreateJob v6 (its count_loss
// is Job.CountLoss). It is the one place the legacy form is converted:
// on decoding CreateJob v1..v5 and snapshot format 2. What the state
// machine stored as "" (at-most-once, no compression) is said outright
// where jobspec says it; the workers are autoscale and max_workers'.
//
// Every option validate accepts converts, but for two values no node
// proposed (its client refused them): a negative autoscale_revisit and a
// NaN autoscale_threshold, both of which meant the policy's default.
func (o JobOptions) stored() (jobspec.Job, error) {
	delivery := o.Delivery
	if delivery == "" && o.Sharding == splits.Dynamic {
		delivery = jobspec.AtMostOnce
	}
	workers := jobspec.AllWorkers
	switch {
	case o.Autoscale:
		workers = jobspec.AutoWorkers
	case o.MaxWorkers > 0:
		workers = jobspec.FixedWorkers(o.MaxWorkers)
	}
	j, err := jobspec.StoredJob(jobspec.Options{
		Sharding: jobspec.Sharding(o.Sharding.String()), Epochs: o.Epochs, NumConsumers: o.NumConsumers, MaxWorkers: o.MaxWorkers,
		ConsumerTTL: o.ConsumerTTL, GCAfter: o.GCAfter, Share: o.Share, Coordinated: o.Coordinated, PadFinalRound: o.PadFinalRound,
		Compression: o.Compression, Delivery: delivery, Autoscale: o.Autoscale, Workers: workers,
		AutoscaleThreshold: o.AutoscaleThreshold, AutoscaleRevisit: o.AutoscaleRevisit, AutoscalePause: o.AutoscalePause,
		OffloadBoundary: o.OffloadBoundary,
	})
	if err != nil {
		return jobspec.Job{}, fmt.Errorf("%w: job options of an older CreateJob, accepted then, that no node proposed: %v", ErrInvalidCommand, err)
	}
	return j, nil
}

// checkStored checks what the state machine adds to jobspec's rules of a
// stored job (jobspec.Job holds those): that a job counts its loss only
// where it can, and that its autoscaling knobs make a valid policy.
func checkStored(o jobspec.Job, countLoss bool) error {
	var errs []string
	if countLoss && (o.Delivery() != jobspec.AtMostOnce || o.Sharding() != jobspec.Dynamic || o.Share() || o.Coordinated()) {
		errs = append(errs, fmt.Sprintf("count_loss needs delivery %s, sharding=dynamic, without share or coordinated reads (have delivery=%s sharding=%v share=%v coordinated=%v)",
			DeliveryAtMostOnce, deliveryName(o.Delivery()), o.Sharding(), o.Share(), o.Coordinated()))
	}
	if o.Autoscale() {
		if err := tuneScale(scaleConfigAllocated, o.AutoscaleThreshold(), o.AutoscaleRevisit(), o.AutoscalePause()).Validate(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: job options: %s", ErrInvalidCommand, strings.Join(errs, ", "))
	}
	return nil
}

// optionsDiff names each option of the job (o, countLoss) that differs
// from the one asked for, as JobMismatchError lists them.
func optionsDiff(o jobspec.Job, countLoss bool, want jobspec.Job, wantCountLoss bool) []string {
	d := o.Diff(want)
	if countLoss != wantCountLoss {
		d = append(d, fmt.Sprintf("count_loss=%v, not %v", countLoss, wantCountLoss))
	}
	return d
}

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

// deliveryName is the name of a stored JobOptions.Delivery.
func deliveryName(d string) string {
	if d == "" {
		return DeliveryAtMostOnce
	}
	return d
}
