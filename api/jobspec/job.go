package jobspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// Job is a job's options, normalized: its defaults filled and every rule
// of a stored job checked. It is what the cluster stores and replicates
// (the state machine's Job.Options, carried as it is in its CreateJob
// command) and shows (api.JobInfo.Options is Options()). Its fields are
// unexported: a Job comes only from Normalize, from decoding (which
// normalizes and checks again) or from StoredJob, so it is always
// normalized. It holds no consumer's choice (Consumer has them) and no
// name (the job's name is its key).
//
// The zero Job is not a job (IsZero).
type Job struct {
	o Options // the job part: Name and the consumer's fields are zero
}

// Schema is the highest job options schema this package knows: 1, the
// options of the first release of Job. The state machine's CreateJob
// version follows it (v6 carries schema 1), so that a node that does not
// know an option refuses the command that carries it instead of dropping
// the option. To add an option: a field of Options with a new key, its
// rules in checkJob, its line in Diff, Schema+1, and Job.Schema says which
// jobs need the new schema (those that set it).
const Schema = 1

// Schema is the least schema that carries j.
func (j Job) Schema() int { return 1 }

// StoredJob is the job part of o, normalized and checked against the rules
// every stored job meets, like a decoded Job. It skips the rules of a new
// request that Normalize adds (no repeating for ever, no sharing of a
// STATIC job): it is for the state machine's options of older logs, which
// it converts once, on decode. A client or a node that takes a request
// calls Normalize.
func StoredJob(o Options) (Job, error) {
	if err := o.consumerFieldsZero(); err != nil {
		return Job{}, err
	}
	o.normalizeJob()
	if err := o.checkJob(); err != nil {
		return Job{}, err
	}
	return Job{o: o}, nil
}

// consumerFieldsZero refuses options for a Job that carry a consumer's
// choices or a name.
func (o Options) consumerFieldsZero() error {
	if o.Name != "" || o.ConsumerIndex != 0 || o.Resume != nil || o.Offload != "" || o.LocalCPUs != 0 {
		return fmt.Errorf("a job's options carry name %q, consumer_index %d, resume (%d bytes), offload %q or local_cpus %v: those are a consumer's, never the job's (Normalize separates them)",
			o.Name, o.ConsumerIndex, len(o.Resume), o.Offload, o.LocalCPUs)
	}
	return nil
}

// IsZero reports whether j is the zero Job, which no job has.
func (j Job) IsZero() bool { return j.o.Sharding == "" }

// Options returns the job's options in their request form, normalized:
// what api.JobInfo shows and a checkpoint records. Normalizing them (with
// a name) gives j back.
func (j Job) Options() Options { return j.o }

// Sharding is the job's sharding policy.
func (j Job) Sharding() Sharding { return j.o.Sharding }

// Epochs is how many passes the job makes: >= 1, or -1 (for ever, a job
// of an older log).
func (j Job) Epochs() int64 { return j.o.Epochs }

// NumConsumers limits the consumers that may attach (0: any number); a
// coordinated job's consumers per round.
func (j Job) NumConsumers() int { return j.o.NumConsumers }

// MaxWorkers caps the job's workers (0: no cap).
func (j Job) MaxWorkers() int { return j.o.MaxWorkers }

// ConsumerTTL is the consumers' lease.
func (j Job) ConsumerTTL() time.Duration { return j.o.ConsumerTTL }

// GCAfter is how long the job lives without consumers.
func (j Job) GCAfter() time.Duration { return j.o.GCAfter }

// Share reports ephemeral sharing.
func (j Job) Share() bool { return j.o.Share }

// Coordinated reports coordinated reads.
func (j Job) Coordinated() bool { return j.o.Coordinated }

// PadFinalRound reports a coordinated job's padded final rounds.
func (j Job) PadFinalRound() bool { return j.o.PadFinalRound }

// Compression is the job's compression's name, "" for none.
func (j Job) Compression() string { return j.o.Compression }

// Delivery is ExactlyOnce or AtMostOnce for a DYNAMIC job, "" for others.
func (j Job) Delivery() string { return j.o.Delivery }

// Autoscale reports Workers auto.
func (j Job) Autoscale() bool { return j.o.Autoscale }

// Workers is auto, all or a fixed count.
func (j Job) Workers() Workers { return j.o.Workers }

// AutoscaleThreshold, AutoscaleRevisit and AutoscalePause are the
// autoscaling policy's knobs (0: the policy's default; a pause of -1: none).
func (j Job) AutoscaleThreshold() float64 { return j.o.AutoscaleThreshold }

// AutoscaleRevisit: see AutoscaleThreshold.
func (j Job) AutoscaleRevisit() int { return j.o.AutoscaleRevisit }

// AutoscalePause: see AutoscaleThreshold.
func (j Job) AutoscalePause() int { return j.o.AutoscalePause }

// OffloadBoundary is the job's cut (0: none).
func (j Job) OffloadBoundary() int { return j.o.OffloadBoundary }

// WithOffloadBoundary is j cut after cut ops: the cut offload auto
// chooses for a running job, or a consumer adopts from it. An error says
// why j cannot be cut there.
func (j Job) WithOffloadBoundary(cut int) (Job, error) {
	o := j.o
	o.OffloadBoundary = cut
	if err := o.checkJob(); err != nil {
		return Job{}, err
	}
	return Job{o: o}, nil
}

// Diff names each option of j that differs from want's, as
// "name=j's value, not want's": the state machine's answer to a consumer
// that asks for a job of that name with other options. Its wording and
// order are the recorded log's (internal/fsm/testdata/compat): a new
// option adds its line, no line changes. Workers is not compared: it is
// autoscale and max_workers.
func (j Job) Diff(want Job) []string {
	var d []string
	add := func(name string, have, want any) {
		if have != want {
			d = append(d, fmt.Sprintf("%s=%v, not %v", name, have, want))
		}
	}
	a, b := j.o, want.o
	add("sharding", string(a.Sharding), string(b.Sharding))
	add("epochs", a.Epochs, b.Epochs)
	add("num_consumers", a.NumConsumers, b.NumConsumers)
	add("share", a.Share, b.Share)
	add("coordinated", a.Coordinated, b.Coordinated)
	add("max_workers", a.MaxWorkers, b.MaxWorkers)
	add("consumer_ttl", a.ConsumerTTL, b.ConsumerTTL)
	add("gc_after", a.GCAfter, b.GCAfter)
	add("pad_final_round", a.PadFinalRound, b.PadFinalRound)
	add("compression", compressionName(a.Compression), compressionName(b.Compression))
	add("delivery", deliveryName(a.Delivery), deliveryName(b.Delivery))
	add("autoscale", a.Autoscale, b.Autoscale)
	add("autoscale_threshold", a.AutoscaleThreshold, b.AutoscaleThreshold)
	add("autoscale_revisit", a.AutoscaleRevisit, b.AutoscaleRevisit)
	add("autoscale_pause", a.AutoscalePause, b.AutoscalePause)
	add("offload_boundary", a.OffloadBoundary, b.OffloadBoundary)
	return d
}

// compressionName names a normalized compression: none for "".
func compressionName(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

// deliveryName names a delivery as the mismatch answer always has: an
// OFF or STATIC job's "" as at-most-once (what a dead worker's share of
// it is).
func deliveryName(d string) string {
	if d == "" {
		return AtMostOnce
	}
	return d
}

var (
	// jobEnc is deterministic (sorted keys, shortest forms): equal Jobs
	// encode to equal bytes, as the state machine's snapshots need.
	jobEnc cbor.EncMode
	// jobDec takes only what a Job is: no duplicate or unknown keys (an
	// unknown key is a newer schema's option, which comes with a newer
	// CreateJob version), no indefinite lengths, valid UTF-8.
	jobDec cbor.DecMode
)

func init() {
	var err error
	if jobEnc, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err) // static options: only a programming error gets here
	}
	jobDec, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		MaxNestedLevels:   4,
		MaxArrayElements:  64,
		MaxMapPairs:       64,
		UTF8:              cbor.UTF8RejectInvalid,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// MarshalCBOR encodes the job's options under Options' keys.
func (j Job) MarshalCBOR() ([]byte, error) {
	if j.IsZero() {
		return nil, errors.New("encode job options: the zero Job is not a job's options")
	}
	return jobEnc.Marshal(j.o)
}

// UnmarshalCBOR decodes a Job strictly, then normalizes and checks it as
// StoredJob does: a decoded Job is always normalized. Errors name what was
// wrong; it never panics.
func (j *Job) UnmarshalCBOR(data []byte) error {
	var o Options
	if err := jobDec.Unmarshal(data, &o); err != nil {
		return fmt.Errorf("job options: %w", err)
	}
	k, err := StoredJob(o)
	if err != nil {
		return fmt.Errorf("job options: %w", err)
	}
	*j = k
	return nil
}

// MarshalJSON writes the job's options under Options' JSON names.
func (j Job) MarshalJSON() ([]byte, error) { return json.Marshal(j.o) }

// UnmarshalJSON reads them back, normalizing and checking as
// UnmarshalCBOR does.
func (j *Job) UnmarshalJSON(b []byte) error {
	var o Options
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("job options: %w", err)
	}
	k, err := StoredJob(o)
	if err != nil {
		return fmt.Errorf("job options: %w", err)
	}
	*j = k
	return nil
}
