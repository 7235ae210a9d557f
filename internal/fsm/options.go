package fsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// JobOptions are a job's options, fixed at CreateJob. Zero fields get
// defaults (see each field); the stored Job holds the normalized values.
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

// maxOffloadBoundary bounds JobOptions.OffloadBoundary.
const maxOffloadBoundary = 1024

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
	case o.OffloadBoundary < 0 || o.OffloadBoundary > maxOffloadBoundary:
		errs = append(errs, fmt.Sprintf("offload_boundary %d (want 0..%d)", o.OffloadBoundary, maxOffloadBoundary))
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

// compressionName is the name of a stored JobOptions.Compression.
func compressionName(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

// deliveryName is the name of a stored JobOptions.Delivery.
func deliveryName(d string) string {
	if d == "" {
		return DeliveryAtMostOnce
	}
	return d
}
