package pipeline

import (
	"context"
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
	// WaitSeconds is time the op spent waiting on its input.
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
}

type opStats struct {
	name        string
	parallelism int
	concurrent  bool
	out         atomic.Int64
	bytesOut    atomic.Int64
	nextNanos   atomic.Int64
	busyNanos   atomic.Int64 // concurrent ops only
	skipped     atomic.Int64
	replaced    atomic.Int64
	packTokens  atomic.Int64 // pack: tokens placed in rows
	packPadding atomic.Int64 // pack: padding tokens
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
}

const (
	sampleEvery    = 32
	headExactCalls = 4
	headExactNanos = 5_000
	publishEvery   = 64
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
	p0 := t.seg.pairs
	start := mono()
	x, err := t.it.next(ctx)
	d := mono() - start
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
	if t.unpublished >= publishEvery || err != nil {
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
	if !p.statsOn {
		return s
	}
	best := 0.0
	for k, st := range p.stats {
		o := OpStats{
			Name:        st.name,
			Index:       k - 1,
			ElementsOut: st.out.Load(),
			BytesOut:    st.bytesOut.Load(),
			Parallelism: st.parallelism,
			Skipped:     st.skipped.Load(),
			Replaced:    st.replaced.Load(),
		}
		o.PackedTokens, o.PaddingTokens = st.packTokens.Load(), st.packPadding.Load()
		if slots := o.PackedTokens + o.PaddingTokens; slots > 0 {
			o.PaddingFraction = float64(o.PaddingTokens) / float64(slots)
		}
		own := st.nextNanos.Load()
		var wait int64
		if k > 0 {
			o.ElementsIn = p.stats[k-1].out.Load()
			wait = p.stats[k-1].nextNanos.Load()
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
