package jobspec

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Normalized is Options after Normalize: the job's name, the job's
// options (Job: what the cluster stores, the same for every consumer) and
// this consumer's choices (Consumer), each normalized and checked. Its
// fields are unexported: there is no way to un-normalize it, and a change
// goes through Options and Normalize again.
type Normalized struct {
	name     string
	job      Job
	consumer Consumer
}

// Name is the job's name.
func (n Normalized) Name() string { return n.name }

// Job is the job's options.
func (n Normalized) Job() Job { return n.job }

// Consumer is the consumer's choices.
func (n Normalized) Consumer() Consumer { return n.consumer }

// Options is n in its request form: what a client sends
// (api.DistributeRequest.Options: normalized, so that a node of an older
// release, which reads Autoscale and MaxWorkers rather than Workers,
// creates the same job), and what a consumer edits to ask for other
// options. Normalize(n.Options()) is n, but for Consumer.WorkersUnset:
// the request form says the workers outright.
func (n Normalized) Options() Options {
	o := n.job.o
	o.Name = n.name
	c := n.consumer
	o.ConsumerIndex, o.Resume, o.Offload, o.LocalCPUs = c.index, c.resume, c.request(), c.localCPUs
	o.Order, o.Seed, o.ReorderBatches, o.SkipBatches = c.order, c.seed, c.reorder, c.SkipBatches()
	return o
}

// WithResume is n resuming from checkpoint ck (nil: from none), checked
// as Normalize checks a Resume: for a consumer that reads its checkpoint
// once its other options are known good.
func (n Normalized) WithResume(ck []byte) (Normalized, error) {
	o := n.Options()
	o.Resume = ck
	c, err := newConsumer(o, n.job.o)
	if err != nil {
		return Normalized{}, err
	}
	c.workersUnset = n.consumer.workersUnset
	n.consumer = c
	return n, nil
}

// Consumer is one consumer's choices in a job: its index (coordinated
// reads), where its pipeline runs (offload) and on how many of its host's
// CPUs, and the checkpoint it resumes from. The cluster stores none of
// them with the job.
type Consumer struct {
	index        int
	offload      string  // the mode, as ParseOffload names it
	fraction     float64 // the local share of a fixed mode; -1 for auto
	localCPUs    float64
	resume       []byte
	workersUnset bool
	order        string // "", any or deterministic: for the spec
	seed         uint64 // 0: the spec's
	reorder      int
	skips        [][2]int64 // sorted, disjoint, not touching
}

// SkipBatches are the ranges of its batch sequence the consumer passes
// over (JobOptions.SkipBatches): sorted, disjoint and not touching.
func (c Consumer) SkipBatches() [][2]int64 {
	if len(c.skips) == 0 {
		return nil
	}
	return append([][2]int64(nil), c.skips...)
}

// normalizeSkips checks skip ranges and returns them sorted and merged.
func normalizeSkips(rs [][2]int64) ([][2]int64, error) {
	if len(rs) > MaxSkipRanges {
		return nil, fmt.Errorf("skip_batches: %d ranges, at most %d", len(rs), MaxSkipRanges)
	}
	var out [][2]int64
	for _, r := range rs {
		if r[0] < 0 || r[1] <= r[0] {
			return nil, fmt.Errorf("skip_batches: [%d, %d): want 0 <= lo < hi", r[0], r[1])
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// Order is the order the consumer asks to write into the spec: "" (the
// spec's own), any or deterministic.
func (c Consumer) Order() string { return c.order }

// Seed is the seed the consumer asks to write into the spec (0: the
// spec's own).
func (c Consumer) Seed() uint64 { return c.seed }

// ReorderBatches bounds the reorder buffer of a deterministic job's
// consumer.
func (c Consumer) ReorderBatches() int {
	if c.reorder == 0 {
		return DefaultReorderBatches
	}
	return c.reorder
}

// Index is a coordinated job's consumer index (0 for other jobs, whatever
// the options said).
func (c Consumer) Index() int { return c.index }

// Offload is the offload mode: OffloadAuto, OffloadRemote, OffloadLocal
// or a fixed fraction's FractionMode.
func (c Consumer) Offload() string { return c.offload }

// Fraction is the local share a fixed offload mode means (remote 0,
// local 1), -1 for auto.
func (c Consumer) Fraction() float64 { return c.fraction }

// LocalCPUs is the local worker's CPU budget in cores (0: the spare CPUs
// measured).
func (c Consumer) LocalCPUs() float64 { return c.localCPUs }

// Resume is the checkpoint to resume from (nil: none).
func (c Consumer) Resume() []byte { return c.resume }

// WorkersUnset reports that the consumer set none of Workers, MaxWorkers,
// Autoscale and the autoscaling knobs: its Job has the default worker
// count, which a resume trades for the job's own (client/adopt.go).
func (c Consumer) WorkersUnset() bool { return c.workersUnset }

// request is the offload as a request says it, exactly: a fixed fraction
// with all its digits.
func (c Consumer) request() string {
	switch c.offload {
	case OffloadAuto, OffloadRemote, OffloadLocal:
		return c.offload
	}
	return "fraction=" + strconv.FormatFloat(c.fraction, 'g', -1, 64)
}

// newConsumer checks the consumer's choices in o against its normalized
// job options job.
func newConsumer(o, job Options) (Consumer, error) {
	mode, fraction, err := ParseOffload(o.Offload)
	if err != nil {
		return Consumer{}, err
	}
	c := Consumer{index: o.ConsumerIndex, offload: mode, fraction: fraction, localCPUs: o.LocalCPUs,
		workersUnset: canonical(string(o.Workers)) == "" && o.MaxWorkers == 0 && !o.Autoscale && o.AutoscaleThreshold == 0 && o.AutoscaleRevisit == 0 && o.AutoscalePause == 0}
	if len(o.Resume) > 0 {
		c.resume = o.Resume
	}
	c.order, c.seed, c.reorder = strings.ToLower(strings.TrimSpace(o.Order)), o.Seed, o.ReorderBatches
	switch c.order {
	case "", ValAny, ValDeterministic:
	default:
		return Consumer{}, fmt.Errorf("order %q: want any or deterministic", o.Order)
	}
	if c.skips, err = normalizeSkips(o.SkipBatches); err != nil {
		return Consumer{}, err
	}
	if c.reorder < 0 || c.reorder > MaxReorderBatches {
		return Consumer{}, fmt.Errorf("reorder_batches %d: want 0 (the default, %d) up to %d", c.reorder, DefaultReorderBatches, MaxReorderBatches)
	}
	if !job.Coordinated {
		c.index = 0 // only a coordinated job's consumers have one (a node never refused it)
	}
	local := mode != OffloadAuto && mode != OffloadRemote
	switch {
	case job.Coordinated && (o.ConsumerIndex < 0 || o.ConsumerIndex >= job.NumConsumers):
		return Consumer{}, fmt.Errorf("ConsumerIndex %d: must be in [0, NumConsumers=%d)", o.ConsumerIndex, job.NumConsumers)
	case !(o.LocalCPUs >= 0 && o.LocalCPUs <= MaxLocalCPUs):
		return Consumer{}, fmt.Errorf("local_cpus %v: want 0 (the spare CPUs measured) up to %d", o.LocalCPUs, MaxLocalCPUs)
	case local && !job.autoscalable():
		return Consumer{}, fmt.Errorf("offload %s: a local worker needs sharding dynamic without share or coordinated reads (have sharding %s, share %v, coordinated %v); use offload remote", o.Offload, job.Sharding, job.Share, job.Coordinated)
	case local && job.OffloadBoundary > 0:
		return Consumer{}, fmt.Errorf("offload_boundary %d with offload %s: a cut runs the ops before it on the nodes only; a local worker beside a cut is not built (use offload remote)", job.OffloadBoundary, o.Offload)
	case c.resume != nil && (job.Sharding != Dynamic || job.Delivery != ExactlyOnce || job.Share):
		return Consumer{}, fmt.Errorf("resume: only exactly-once DYNAMIC jobs resume from a checkpoint (no share)")
	}
	return c, nil
}
