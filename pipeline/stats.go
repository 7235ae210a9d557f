package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Per-op statistics, Plumber-style: every stage counts what it emits and
// how long its consumer spent inside its Next. Because a stage's Next
// includes the time its own input's Next took, a sequential op's own work
// (busy) is its Next time minus its input's, and its wait is its input's
// Next time. Ops that run goroutines (parallel map, prefetch) measure their
// own work inside those goroutines instead.

// OpStats are one op's statistics.
type OpStats struct {
	// Name identifies the op: "source:files:lines", "map(tokenize_whitespace)",
	// "shuffle", …
	Name string `json:"name"`
	// Index is the op's position in Spec.Ops; -1 for the source.
	Index int `json:"index"`
	// ElementsIn and ElementsOut count elements consumed and produced (a
	// batch counts as one element).
	ElementsIn  int64 `json:"elements_in"`
	ElementsOut int64 `json:"elements_out"`
	// BytesOut is the payload of the produced elements (exact on short
	// runs, an unbiased sample-based estimate on long ones, like the
	// times; see timed in stats.go).
	BytesOut int64 `json:"bytes_out"`
	// BusySeconds is time spent in the op's own work, summed over its
	// goroutines for a parallel map.
	BusySeconds float64 `json:"busy_seconds"`
	// WaitSeconds is time the op spent waiting on its input. For the
	// source over a split provider (a DYNAMIC job's worker), it is the
	// time spent waiting for the next split (leases): counted as no op's
	// work, and not in StallSeconds.
	WaitSeconds float64 `json:"wait_seconds"`
	// StallSeconds is the time the op's consumer spent waiting on it
	// beyond the time the op itself spent waiting on its input: the op's
	// cost on the critical path. For a sequential op it equals
	// BusySeconds; for a parallel map it includes the hand-off between
	// goroutines and shrinks as parallelism hides work; for a prefetch it
	// is usually zero.
	StallSeconds float64 `json:"stall_seconds"`
	// Parallelism is how many elements the op works on at once.
	Parallelism int `json:"parallelism"`
	// Skipped counts records a source skipped: corrupt tfrecord records
	// (skip_corrupt), lines with invalid UTF-8 (on_invalid: skip).
	Skipped int64 `json:"skipped,omitempty"`
	// Replaced counts lines a source passed on with their invalid UTF-8
	// replaced by U+FFFD (on_invalid: replace).
	Replaced int64 `json:"replaced,omitempty"`
	// PackedTokens and PaddingTokens count, for a pack op, the tokens
	// placed in the rows it produced and the padding that filled them up;
	// PaddingFraction is PaddingTokens / (PackedTokens + PaddingTokens).
	PackedTokens    int64   `json:"packed_tokens,omitempty"`
	PaddingTokens   int64   `json:"padding_tokens,omitempty"`
	PaddingFraction float64 `json:"padding_fraction,omitempty"`
}

// Stats are a pipeline's statistics.
type Stats struct {
	// Ops has the source first, then one entry per op in spec order.
	Ops []OpStats `json:"ops"`
	// Elapsed is the wall time from Open to the end of the input (or now).
	Elapsed time.Duration `json:"-"`
	// Bounding is the index in Ops of the op that bounds throughput: the
	// one with the largest StallSeconds. -1 when statistics are off or
	// nothing ran (the source gave no element).
	Bounding int `json:"bounding"`
	// Autocache counts what the autocache op did (nil without one, or
	// without Options.Cache).
	Autocache *AutocacheStats `json:"autocache,omitempty"`
}

type opStats struct {
	name        string
	parallelism atomic.Int64 // live for tuned maps
	concurrent  bool
	out         atomic.Int64
	bytesOut    atomic.Int64
	nextNanos   atomic.Int64
	busyNanos   atomic.Int64 // concurrent ops only
	skipped     atomic.Int64
	replaced    atomic.Int64
	// splitWaitNanos (the source over a split provider): time spent
	// waiting for the next split, exact.
	splitWaitNanos atomic.Int64
	packTokens     atomic.Int64 // pack: tokens placed in rows
	packPadding    atomic.Int64 // pack: padding tokens
}

// timed wraps a stage to count its output and time its Next.
//
// Element counts are exact. Times and bytes are sampled, because two clock reads per stage
// per element would cost as much as a cheap op's work. Stages form
// segments: a chain of stages driven by one goroutine (the consumer, or the
// goroutine of a prefetch or parallel map). The segment's outermost stage,
// its head, decides per call whether the call is timed, and every stage
// called during that call follows the decision with the same weight. So a
// stage's own time (its Next time minus its input's) is measured on exactly
// the same calls as its input's: the difference stays exact within the
// sample instead of being the difference of two independent estimates.
//
// The head times its first headExactCalls calls, and every call when the
// timed calls take long enough (on average headExactNanos per clock-read
// pair) that reading the clock costs under about 1 %. Otherwise it times a
// random 1 in sampleEvery calls, weighted by sampleEvery: an unbiased
// estimate that random (not periodic) sampling keeps free of aliasing with
// periodic costs. Counters are kept locally and published
// every publishEvery calls and at the end, so the hot path takes no atomic
// operations.
type timed struct {
	it   iter
	st   *opStats
	seg  *segment
	head bool

	out, bytes, nanos int64 // not yet published
	unpublished       int
	// Head only: calls so far; time and clock-read pairs of the timed
	// calls (halved now and then to follow phase changes).
	calls, timedNanos, timedPairs int64
	rng                           uint64
}

// segment carries its head's decision to the stages it calls.
type segment struct {
	weight int64 // 0: this call is not timed
	pairs  int64 // clock-read pairs taken in the segment so far
	// external is the time spent so far waiting outside the pipeline's
	// work (the source waiting for splits from a provider); a timed call
	// leaves out what it grew by during the call.
	external int64
}

const (
	sampleEvery    = 32
	headExactCalls = 4
	headExactNanos = 5_000
	publishEvery   = 64
	// publishNanos also publishes a stage's counts once its (weighted)
	// time since the last publication reaches it, so that the live
	// statistics of a slow pipeline (diagnose --job, metrics, the
	// autotuner's windows) lag by at most about that much time, not by
	// publishEvery slow elements.
	publishNanos = 10_000_000
)

// monoEpoch anchors mono: time.Since on a time with a monotonic reading
// costs one clock read, time.Now two.
var monoEpoch = time.Now()

func mono() int64 { return int64(time.Since(monoEpoch)) }

func (t *timed) next(ctx context.Context) (item, error) {
	if t.head {
		t.seg.weight = t.decide()
	}
	w := t.seg.weight
	if w == 0 {
		x, err := t.it.next(ctx)
		t.count(err)
		return x, err
	}
	p0, ext0 := t.seg.pairs, t.seg.external
	start := mono()
	x, err := t.it.next(ctx)
	d := mono() - start - (t.seg.external - ext0)
	t.nanos += d * w
	t.seg.pairs++
	if t.head {
		t.timedNanos += d
		t.timedPairs += t.seg.pairs - p0
	}
	if err == nil {
		t.bytes += int64(x.el.ByteSize()) * w
	}
	t.count(err)
	return x, err
}

func (t *timed) count(err error) {
	if err == nil {
		t.out++
	}
	t.unpublished++
	if t.unpublished >= publishEvery || t.nanos >= publishNanos || err != nil {
		t.publish()
	}
}

// decide returns the weight of the head's next call.
func (t *timed) decide() int64 {
	if t.calls < headExactCalls {
		t.calls++
		return 1
	}
	if t.timedPairs > 1<<20 {
		t.timedNanos, t.timedPairs = t.timedNanos/2, t.timedPairs/2
	}
	if t.timedNanos > headExactNanos*t.timedPairs {
		return 1
	}
	t.rng = t.rng*6364136223846793005 + 1442695040888963407
	if (t.rng>>59)&(sampleEvery-1) != 0 {
		return 0
	}
	return sampleEvery
}

func (t *timed) publish() {
	t.st.out.Add(t.out)
	t.st.bytesOut.Add(t.bytes)
	t.st.nextNanos.Add(t.nanos)
	t.out, t.bytes, t.nanos, t.unpublished = 0, 0, 0, 0
}

func (t *timed) close() {
	t.it.close()
	t.publish()
}

func (p *plan) snapshot(elapsed time.Duration) Stats {
	s := Stats{Elapsed: elapsed, Bounding: -1}
	if p.autocache != nil {
		s.Autocache = p.autocache.snapshot()
	}
	if !p.statsOn {
		return s
	}
	best := 0.0
	sourceSegmentEnded := false
	for k, st := range p.stats {
		o := OpStats{
			Name:        st.name,
			Index:       k - 1,
			ElementsOut: st.out.Load(),
			BytesOut:    st.bytesOut.Load(),
			Parallelism: int(st.parallelism.Load()),
			Skipped:     st.skipped.Load(),
			Replaced:    st.replaced.Load(),
		}
		o.PackedTokens, o.PaddingTokens = st.packTokens.Load(), st.packPadding.Load()
		o.PaddingFraction = paddingFraction(o)
		own := st.nextNanos.Load()
		var wait int64
		if k > 0 {
			o.ElementsIn = p.stats[k-1].out.Load()
			wait = p.stats[k-1].nextNanos.Load()
			if st.concurrent && !sourceSegmentEnded {
				// The first op whose input runs in its own goroutine
				// waited on it while the source waited for splits: that
				// time is left out of the source's segment only
				// (segment.external), so leave it out here too.
				sourceSegmentEnded = true
				own = max(own-p.stats[0].splitWaitNanos.Load(), wait)
			}
		} else {
			wait = st.splitWaitNanos.Load() // not part of own: see segment.external
			own += wait
		}
		busy := own - wait
		o.StallSeconds = float64(max(busy, 0)) / 1e9
		if st.concurrent {
			busy = st.busyNanos.Load()
		}
		o.BusySeconds = float64(max(busy, 0)) / 1e9
		o.WaitSeconds = float64(max(wait, 0)) / 1e9
		if o.StallSeconds > best {
			best, s.Bounding = o.StallSeconds, k
		}
		s.Ops = append(s.Ops, o)
	}
	if len(s.Ops) > 0 && s.Ops[0].ElementsOut == 0 {
		// The source gave nothing (an empty file, say): the time spent
		// opening it bounds nothing.
		s.Bounding = -1
	}
	return s
}

// Sum returns s with o's counts and times added op by op, as the
// statistics of two runs of the same spec (one after the other, or side by
// side on two workers): elements, bytes, skipped and replaced records and
// busy, wait and stall seconds add up, Elapsed adds up, Parallelism is the
// larger, and Bounding is recomputed. Stats of a different shape (another
// spec) are an error.
func (s Stats) Sum(o Stats) (Stats, error) {
	switch {
	case len(o.Ops) == 0:
		return s.clone(), nil
	case len(s.Ops) == 0:
		c := o.clone()
		c.Elapsed += s.Elapsed
		return c, nil
	case len(s.Ops) != len(o.Ops):
		return Stats{}, fmt.Errorf("pipeline stats of %d and %d ops do not add up", len(s.Ops), len(o.Ops))
	}
	out := Stats{Ops: make([]OpStats, len(s.Ops)), Elapsed: s.Elapsed + o.Elapsed, Bounding: -1}
	best := 0.0
	for k, a := range s.Ops {
		b := o.Ops[k]
		if a.Name != b.Name || a.Index != b.Index {
			return Stats{}, fmt.Errorf("pipeline stats: op %d is %q in one and %q in the other", k, a.Name, b.Name)
		}
		a.ElementsIn += b.ElementsIn
		a.ElementsOut += b.ElementsOut
		a.BytesOut += b.BytesOut
		a.BusySeconds += b.BusySeconds
		a.WaitSeconds += b.WaitSeconds
		a.StallSeconds += b.StallSeconds
		a.Parallelism = max(a.Parallelism, b.Parallelism)
		a.Skipped += b.Skipped
		a.Replaced += b.Replaced
		a.PackedTokens += b.PackedTokens
		a.PaddingTokens += b.PaddingTokens
		a.PaddingFraction = paddingFraction(a)
		out.Ops[k] = a
		if a.StallSeconds > best {
			best, out.Bounding = a.StallSeconds, k
		}
	}
	if out.Ops[0].ElementsOut == 0 {
		out.Bounding = -1
	}
	return out, nil
}

func (s Stats) clone() Stats {
	s.Ops = slices.Clone(s.Ops)
	return s
}

// Minus returns what s counted since prev, an earlier snapshot of the same
// pipeline: counts and times subtracted op by op, Elapsed too;
// Parallelism is s's. Stats of a different shape are an error.
func (s Stats) Minus(prev Stats) (Stats, error) {
	if len(prev.Ops) == 0 {
		return s.clone(), nil
	}
	if len(s.Ops) != len(prev.Ops) {
		return Stats{}, fmt.Errorf("pipeline stats of %d and %d ops do not subtract", len(s.Ops), len(prev.Ops))
	}
	out := Stats{Ops: make([]OpStats, len(s.Ops)), Elapsed: s.Elapsed - prev.Elapsed, Bounding: -1}
	best := 0.0
	for k, a := range s.Ops {
		b := prev.Ops[k]
		if a.Name != b.Name || a.Index != b.Index {
			return Stats{}, fmt.Errorf("pipeline stats: op %d is %q in one and %q in the other", k, a.Name, b.Name)
		}
		a.ElementsIn -= b.ElementsIn
		a.ElementsOut -= b.ElementsOut
		a.BytesOut -= b.BytesOut
		a.BusySeconds -= b.BusySeconds
		a.WaitSeconds -= b.WaitSeconds
		a.StallSeconds -= b.StallSeconds
		a.Skipped -= b.Skipped
		a.Replaced -= b.Replaced
		a.PackedTokens -= b.PackedTokens
		a.PaddingTokens -= b.PaddingTokens
		a.PaddingFraction = paddingFraction(a)
		out.Ops[k] = a
		if a.StallSeconds > best {
			best, out.Bounding = a.StallSeconds, k
		}
	}
	return out, nil
}

// paddingFraction is a pack op's PaddingTokens over the slots it filled
// (0 when none).
func paddingFraction(o OpStats) float64 {
	if slots := o.PackedTokens + o.PaddingTokens; slots > 0 {
		return float64(o.PaddingTokens) / float64(slots)
	}
	return 0
}
