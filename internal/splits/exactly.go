package splits

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// Exactly-once DYNAMIC sharding (DynamicState.ExactlyOnce).
//
// At-most-once (the DynamicState of dynamic.go) loses a dead worker's
// leases: some of their elements may have been delivered, so running them
// again could deliver an element twice. Exactly-once runs them again and
// skips what was delivered, which needs three facts the at-most-once state
// does not have:
//
//   - what was delivered: consumers report the elements they received
//     (Receive, in receipts a few times a second), by (epoch, split,
//     element index);
//   - what a split yields: a worker that has emitted every element of a
//     split says which indices it emitted (Produce; filters drop some, so
//     this is not simply [0, n));
//   - that nothing more will arrive from a dead worker: each consumer that
//     was attached when the worker was expired fences it (Fence: it has
//     stopped reading from it and its receipts cover everything it got).
//
// A split's life: leased (Outstanding) → produced (Produced: the worker has
// emitted it) → settled, once the receipts cover every index it emitted:
// the split is delivered and forgotten. When its worker is expired, a split
// that is leased or produced but not settled becomes orphaned (Orphaned);
// once every consumer that must fence the worker has, it is leased again,
// first, with the delivered indices excluded (Lease.Exclude), and goes
// round the same life. Nothing is lost and nothing repeats as long as the
// consumers stay attached.
//
// A consumer that leaves (Depart) may have taken elements with it that it
// never receipted (a crash), and batches on their way to it are read by no
// one. So when a consumer departs, every split then produced settles at once
// and every split then leased settles as soon as it is produced, whatever
// the receipts say; what they did not cover is counted in Abandoned, and
// receipts that arrive later for those splits (elements that were on their
// way to consumers still attached) take it back off. Abandoned is thus
// exact once the job has ended: the elements that reached no consumer still
// attached.
//
// The job has ended (Complete) when every split of every epoch was handed
// out and every one settled. Workers end their part earlier, once every
// split is produced (AllProduced); until then a worker whose lease said
// Done keeps asking, rarely: a worker's death can orphan splits.

// ErrExactlyOnce: a call that belongs to the other delivery mode (Finish on
// an exactly-once state, Produce or Receive on an at-most-once one).
var ErrExactlyOnce = errors.New("splits: wrong delivery mode")

// ProducedSplit is a split whose worker has emitted every element.
type ProducedSplit struct {
	// Worker emitted it.
	Worker string `cbor:"1,keyasint" json:"worker"`
	// Emitted are the indices it emitted, excluded ones not counted.
	Emitted ranges.Set `cbor:"2,keyasint" json:"emitted"`
}

// ExactCounts counts what exactly-once delivery did, over every epoch.
type ExactCounts struct {
	// Requeued is how many times an orphaned split was leased again.
	Requeued int64 `cbor:"1,keyasint" json:"requeued"`
	// Delivered is how many element receipts were new.
	Delivered int64 `cbor:"2,keyasint" json:"delivered"`
	// Duplicates is how many receipted elements had been receipted
	// before: an element delivered twice. It stays 0 unless something is
	// wrong.
	Duplicates int64 `cbor:"3,keyasint" json:"duplicates"`
	// Abandoned is how many emitted elements reached no consumer that
	// stayed attached (see Depart).
	Abandoned int64 `cbor:"4,keyasint" json:"abandoned"`
	// Departures counts consumers that left while the job ran.
	Departures int64 `cbor:"5,keyasint" json:"departures"`
	// Skipped counts the splits a resumed job did not hand out: its
	// checkpoints say they were delivered completely (resume.go).
	Skipped int64 `cbor:"6,keyasint,omitempty" json:"skipped,omitempty"`
	// Lost (at-most-once with a count, census.go) is how many emitted
	// elements of dead workers' splits no consumer received: exact once
	// the job is Complete.
	Lost int64 `cbor:"7,keyasint,omitempty" json:"lost,omitempty"`
	// Censused (census.go) counts the census runs of dead workers'
	// splits.
	Censused int64 `cbor:"8,keyasint,omitempty" json:"censused,omitempty"`
}

// ExactState is the exactly-once part of a DynamicState, nil when the job is
// at-most-once. Maps are epoch → split → …; inner maps are never empty.
type ExactState struct {
	// Produced: emitted, not settled.
	Produced map[int64]map[int64]ProducedSplit `cbor:"1,keyasint" json:"produced"`
	// Delivered: receipts of splits not settled yet.
	Delivered map[int64]map[int64]ranges.Set `cbor:"2,keyasint" json:"delivered"`
	// Orphaned: split → the expired worker that held it.
	Orphaned map[int64]map[int64]string `cbor:"3,keyasint" json:"orphaned"`
	// Fences: expired worker → consumers whose fence is awaited (sorted).
	Fences map[string][]string `cbor:"4,keyasint" json:"fences"`
	// Lenient: leased splits that settle as soon as they are produced (a
	// consumer departed while they were leased).
	Lenient map[int64]map[int64]bool `cbor:"5,keyasint" json:"lenient"`
	// Unreceipted: splits settled by a departure, with the emitted
	// indices no receipt covered yet (counted in Abandoned).
	Unreceipted map[int64]map[int64]ranges.Set `cbor:"6,keyasint" json:"unreceipted"`
	Counts      ExactCounts                    `cbor:"7,keyasint" json:"counts"`
	// ReceiptSeq is each attached consumer's last applied report number
	// (ApplyReport): a report sent again after its answer was lost is
	// applied once.
	ReceiptSeq map[string]uint64 `cbor:"8,keyasint,omitempty" json:"receipt_seq,omitempty"`
	// Receivers are the consumers whose receipts named elements, sorted,
	// at most jobspec.MaxResumeParts (more could not resume anyway): a job resumed
	// from this one's checkpoints waits for the checkpoint of each
	// (ResumeState.Expect), whatever count the checkpoints say.
	Receivers []string `cbor:"9,keyasint,omitempty" json:"receivers,omitempty"`
	// Census: the job is at-most-once, with this bookkeeping only to count
	// its loss exactly (census.go): a dead worker's splits are not
	// delivered again. Censusing (leased splits run as a census) and
	// Forfeit (orphaned splits whose emitted indices are known) are nil
	// when empty, and always without Census.
	Census    bool                           `cbor:"10,keyasint,omitempty" json:"census,omitempty"`
	Censusing map[int64]map[int64]bool       `cbor:"11,keyasint,omitempty" json:"censusing,omitempty"`
	Forfeit   map[int64]map[int64]ranges.Set `cbor:"12,keyasint,omitempty" json:"forfeit,omitempty"`
}

// addReceiver records that consumer had elements delivered.
func (x *ExactState) addReceiver(consumer string) {
	i, ok := slices.BinarySearch(x.Receivers, consumer)
	if !ok && len(x.Receivers) < jobspec.MaxResumeParts {
		x.Receivers = slices.Insert(x.Receivers, i, consumer)
	}
}

func newExact() *ExactState {
	return &ExactState{
		Produced:    map[int64]map[int64]ProducedSplit{},
		Delivered:   map[int64]map[int64]ranges.Set{},
		Orphaned:    map[int64]map[int64]string{},
		Fences:      map[string][]string{},
		Lenient:     map[int64]map[int64]bool{},
		Unreceipted: map[int64]map[int64]ranges.Set{},
	}
}

// NewDynamicExactlyOnce is NewDynamic for an exactly-once job.
func NewDynamicExactlyOnce(numSplits, epochs int64) *DynamicState {
	d := NewDynamic(numSplits, epochs)
	d.Exact = newExact()
	return d
}

// ExactlyOnce reports whether d re-runs a dead worker's splits.
func (d *DynamicState) ExactlyOnce() bool { return d.Exact != nil && !d.Exact.Census }

// Tracked reports whether d keeps the exactly-once bookkeeping (receipts,
// produced splits, fences): exactly-once, or at-most-once with an exact
// loss count (census.go).
func (d *DynamicState) Tracked() bool { return d.Exact != nil }

// Produce records that worker has emitted every element of the given
// splits of epoch, which it holds. Each entry says which indices it emitted
// (excluded ones not counted). A split whose receipts already cover them
// settles. Every split must be outstanding for worker in that epoch and
// listed once; otherwise Produce changes nothing and returns an error
// wrapping ErrNotLeased.
func (d *DynamicState) Produce(worker string, epoch int64, done []ranges.SplitEmitted) error {
	x := d.Exact
	if x == nil {
		return fmt.Errorf("%w: Produce on an at-most-once job", ErrExactlyOnce)
	}
	seen := make(map[int64]bool, len(done))
	for _, p := range done {
		if seen[p.Split] {
			return fmt.Errorf("produce epoch %d: split %d listed twice", epoch, p.Split)
		}
		seen[p.Split] = true
		if p.Emitted.Intervals() > jobspec.MaxReceiptIntervals {
			return fmt.Errorf("produce epoch %d split %d: %d intervals, limit %d", epoch, p.Split, p.Emitted.Intervals(), jobspec.MaxReceiptIntervals)
		}
		if err := p.Emitted.Validate(); err != nil {
			return fmt.Errorf("produce epoch %d split %d: %w", epoch, p.Split, err)
		}
		holder, ok := ranges.Get(d.Outstanding, epoch, p.Split)
		if !ok {
			return fmt.Errorf("%w: split %d of epoch %d is not outstanding", ErrNotLeased, p.Split, epoch)
		}
		if holder != worker {
			return fmt.Errorf("%w: split %d of epoch %d is leased to %q, not %q", ErrNotLeased, p.Split, epoch, holder, worker)
		}
	}
	for _, p := range done {
		ranges.Del(d.Outstanding, epoch, p.Split)
		if x.Census && d.produceCensus(epoch, p.Split, p.Emitted) {
			continue
		}
		ranges.Put(x.Produced, epoch, p.Split, ProducedSplit{Worker: worker, Emitted: p.Emitted.Clone()})
		if _, lenient := ranges.Get(x.Lenient, epoch, p.Split); lenient {
			ranges.Del(x.Lenient, epoch, p.Split)
			d.settle(epoch, p.Split, true)
		} else if x.Delivered[epoch][p.Split].Covers(p.Emitted) {
			d.settle(epoch, p.Split, false)
		}
	}
	return nil
}

// settle forgets a produced split: delivered, or given up on by a
// departure (abandon), whose unreceipted indices are then counted.
func (d *DynamicState) settle(e, s int64, abandon bool) {
	x := d.Exact
	p := x.Produced[e][s]
	if abandon {
		if rest := p.Emitted.Minus(x.Delivered[e][s]); !rest.Empty() {
			ranges.Put(x.Unreceipted, e, s, rest)
			x.Counts.Abandoned += rest.Len()
		}
	}
	ranges.Del(x.Produced, e, s)
	ranges.Del(x.Delivered, e, s)
	d.countSettled(e, false)
}

// countSettled counts a split of epoch e that settled, finished or lost
// (census.go), and forgets the epoch's counts if nothing of it is left.
func (d *DynamicState) countSettled(e int64, lost bool) {
	c := d.PerEpoch[e]
	if lost {
		c.Lost++
		d.Total.Lost++
	} else {
		c.Finished++
		d.Total.Finished++
	}
	d.PerEpoch[e] = c
	d.prune(e)
}

// Depart records that consumer left the job (detached, or expired): no
// fence is awaited from it any more, and what it may have taken without
// receipting can no longer be told from what is still on its way, so
// every produced split settles now and every leased one as soon as it is
// produced (see the package comment above).
func (d *DynamicState) Depart(consumer string) {
	x := d.Exact
	if x == nil {
		return
	}
	x.Counts.Departures++
	delete(x.ReceiptSeq, consumer)
	if len(x.ReceiptSeq) == 0 {
		x.ReceiptSeq = nil
	}
	for w := range maps.Clone(x.Fences) {
		d.unwait(consumer, w)
	}
	for e, ps := range maps.Clone(x.Produced) {
		for s := range ps {
			d.settle(e, s, true)
		}
	}
	for e, out := range d.Outstanding {
		for s := range out {
			ranges.Put(x.Lenient, e, s, true)
		}
	}
}

// Complete reports whether the job's data has ended: every split of every
// epoch handed out, and none outstanding (at-most-once), or every one
// settled (exactly-once).
func (d *DynamicState) Complete() bool {
	if !d.allOut() || len(d.Outstanding) > 0 {
		return false
	}
	x := d.Exact
	return x == nil || (len(x.Produced) == 0 && len(x.Orphaned) == 0)
}

// AllProduced reports whether every split of every epoch was handed out
// and emitted by a worker not declared dead: nothing is leased or
// orphaned. Workers end their part then, without waiting for the receipts
// (Complete): a consumer's end of data must not wait on another consumer
// reading what is buffered for it. A worker that dies after this point
// orphans what it had emitted and no consumer had received; nobody reads
// it again (its consumers may have ended): ExactProgress.Orphaned then
// stays above 0, and the job never reports itself complete.
func (d *DynamicState) AllProduced() bool {
	return d.allOut() && len(d.Outstanding) == 0 && (d.Exact == nil || len(d.Exact.Orphaned) == 0)
}

func (x *ExactState) clone() *ExactState {
	if x == nil {
		return nil
	}
	c := &ExactState{
		Produced:    map[int64]map[int64]ProducedSplit{},
		Delivered:   map[int64]map[int64]ranges.Set{},
		Orphaned:    map[int64]map[int64]string{},
		Fences:      map[string][]string{},
		Lenient:     map[int64]map[int64]bool{},
		Unreceipted: map[int64]map[int64]ranges.Set{},
		Counts:      x.Counts,
		ReceiptSeq:  maps.Clone(x.ReceiptSeq),
		Receivers:   slices.Clone(x.Receivers),
	}
	for e, m := range x.Produced {
		for s, p := range m {
			p.Emitted = p.Emitted.Clone()
			ranges.Put(c.Produced, e, s, p)
		}
	}
	for e, m := range x.Delivered {
		for s, r := range m {
			ranges.Put(c.Delivered, e, s, r.Clone())
		}
	}
	for e, m := range x.Orphaned {
		c.Orphaned[e] = maps.Clone(m)
	}
	for w, cs := range x.Fences {
		c.Fences[w] = slices.Clone(cs)
	}
	for e, m := range x.Lenient {
		c.Lenient[e] = maps.Clone(m)
	}
	for e, m := range x.Unreceipted {
		for s, r := range m {
			ranges.Put(c.Unreceipted, e, s, r.Clone())
		}
	}
	c.Census = x.Census
	for e, m := range x.Censusing {
		if c.Censusing == nil {
			c.Censusing = map[int64]map[int64]bool{}
		}
		c.Censusing[e] = maps.Clone(m)
	}
	for e, m := range x.Forfeit {
		for s, r := range m {
			c.forfeit(e, s, r.Clone())
		}
	}
	return c
}

// validate checks the exactly-once invariants against d and returns, per
// epoch, how many splits are produced or orphaned.
func (x *ExactState) validate(d *DynamicState) (map[int64]int64, error) {
	if x.Produced == nil || x.Delivered == nil || x.Orphaned == nil || x.Fences == nil || x.Lenient == nil || x.Unreceipted == nil {
		return nil, fmt.Errorf("exactly-once: missing map")
	}
	if err := sortedNames(x.Receivers, jobspec.MaxResumeParts); err != nil {
		return nil, fmt.Errorf("exactly-once: receivers: %w", err)
	}
	handedOut := func(e, s int64) bool {
		return e >= 0 && e <= d.Epoch && s >= 0 && s < d.NumSplits && d.handedOut(e, s)
	}
	held := map[int64]int64{}
	for e, m := range x.Produced {
		if len(m) == 0 {
			return nil, fmt.Errorf("exactly-once: empty produced map of epoch %d", e)
		}
		for s, p := range m {
			if !handedOut(e, s) {
				return nil, fmt.Errorf("exactly-once: produced split %d of epoch %d was never handed out", s, e)
			}
			if _, ok := d.Outstanding[e][s]; ok {
				return nil, fmt.Errorf("exactly-once: split %d of epoch %d both leased and produced", s, e)
			}
			if err := p.Emitted.Validate(); err != nil {
				return nil, fmt.Errorf("exactly-once: produced split %d of epoch %d: %w", s, e, err)
			}
			held[e]++
		}
	}
	for e, m := range x.Orphaned {
		if len(m) == 0 {
			return nil, fmt.Errorf("exactly-once: empty orphaned map of epoch %d", e)
		}
		for s := range m {
			_, out := d.Outstanding[e][s]
			_, prod := x.Produced[e][s]
			if !handedOut(e, s) || out || prod {
				return nil, fmt.Errorf("exactly-once: orphaned split %d of epoch %d is also leased or produced, or was never handed out", s, e)
			}
			held[e]++
		}
	}
	for e, m := range x.Delivered {
		if len(m) == 0 {
			return nil, fmt.Errorf("exactly-once: empty delivered map of epoch %d", e)
		}
		for s, r := range m {
			_, out := d.Outstanding[e][s]
			_, prod := x.Produced[e][s]
			_, orph := x.Orphaned[e][s]
			back := d.HandedBack[e][s]
			if !out && !prod && !orph && !back {
				return nil, fmt.Errorf("exactly-once: receipts kept for split %d of epoch %d, which is settled", s, e)
			}
			if err := r.Validate(); err != nil {
				return nil, fmt.Errorf("exactly-once: receipts of split %d of epoch %d: %w", s, e, err)
			}
		}
	}
	for e, m := range x.Lenient {
		for s := range m {
			if _, out := d.Outstanding[e][s]; !out {
				return nil, fmt.Errorf("exactly-once: lenient split %d of epoch %d is not leased", s, e)
			}
		}
	}
	for e, m := range x.Unreceipted {
		for s, r := range m {
			if err := r.Validate(); err != nil || r.Empty() {
				return nil, fmt.Errorf("exactly-once: unreceipted split %d of epoch %d: %v (%v)", s, e, r, err)
			}
		}
	}
	for w, cs := range x.Fences {
		if len(cs) == 0 || !slices.IsSorted(cs) || len(slices.Compact(slices.Clone(cs))) != len(cs) {
			return nil, fmt.Errorf("exactly-once: fences awaited for %q: %v", w, cs)
		}
	}
	c := x.Counts
	if c.Requeued < 0 || c.Skipped < 0 || c.Delivered < 0 || c.Duplicates < 0 || c.Abandoned < 0 || c.Departures < 0 || c.Lost < 0 || c.Censused < 0 {
		return nil, fmt.Errorf("exactly-once: negative counts %+v", c)
	}
	if err := x.validateCensus(d); err != nil {
		return nil, err
	}
	return held, nil
}
