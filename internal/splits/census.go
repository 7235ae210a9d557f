package splits

import (
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/ranges"
)

// At-most-once with an exact loss count (ExactState.Census).
//
// An at-most-once job never delivers a dead worker's splits again, but its
// consumers must learn exactly how many elements that lost (issue 14:
// loss that happens is reported, never silent). The count needs the same
// facts as exactly-once delivery, so such a job keeps exactly-once's
// bookkeeping (receipts, produced splits, fences, exclusions) and differs
// only in what becomes of an orphaned split once every consumer has fenced
// its dead worker:
//
//   - a split the worker had produced (every element emitted, so its
//     emitted indices are known: Forfeit) settles at once, and what the
//     receipts do not cover is counted lost (ExactCounts.Lost);
//   - a split it had leased and not produced is run once more by a live
//     worker as a census (Lease.Census): the worker runs it with the
//     delivered indices excluded, delivers nothing, and reports what it
//     emitted (Produce), which is counted lost as the split settles.
//
// A settled forfeit or census counts as a lost split (Counts.Lost), so
// the split counts keep their invariant. A census whose worker dies is
// orphaned again and run again; one handed back by a draining worker
// waits, orphaned, for the next worker. Nothing of a forfeited split is
// ever delivered after it settles: its dead worker is fenced by every
// consumer that was attached, and consumers that attach later never read
// an expired worker. So once the job is Complete, Counts.Lost is exactly
// the elements emitted by the job's splits that no consumer received
// (plus Abandoned: those that reached consumers which left).
//
// A census runs on a node, or in a client's local worker that says it
// runs one (LeaseAs's runsCensus; a local worker of a release before it
// does not): a job whose nodes are kept off (offload local) still lets
// them lease a census (CensusWaiting). A local worker that runs censuses
// matters when it holds one of the job's worker slots: once it is the
// job's one live worker, no node would be assigned to run the census.

// NewDynamicCounted is NewDynamic for an at-most-once job whose loss is
// counted exactly (see above).
func NewDynamicCounted(numSplits, epochs int64) *DynamicState {
	d := NewDynamicExactlyOnce(numSplits, epochs)
	d.Exact.Census = true
	return d
}

// Counted reports whether d is at-most-once with an exact loss count.
func (d *DynamicState) Counted() bool { return d.Exact != nil && d.Exact.Census }

// forfeit records, as a dead worker's split is orphaned, the indices it
// had emitted (census mode; produced splits only).
func (x *ExactState) forfeit(e, s int64, emitted ranges.Set) {
	if x.Forfeit == nil {
		x.Forfeit = map[int64]map[int64]ranges.Set{}
	}
	ranges.Put(x.Forfeit, e, s, emitted)
}

// settleForfeits settles the orphaned splits of worker whose emitted
// indices are known, now that no consumer may receive more of them (every
// fence is in, or none was awaited): what the receipts do not cover is
// lost.
func (d *DynamicState) settleForfeits(worker string) {
	x := d.Exact
	if !x.Census || len(x.Forfeit) == 0 {
		return
	}
	for _, e := range slices.Sorted(maps.Keys(x.Forfeit)) {
		for _, s := range slices.Sorted(maps.Keys(x.Forfeit[e])) {
			if x.Orphaned[e][s] != worker {
				continue
			}
			emitted := x.Forfeit[e][s]
			ranges.Del(x.Forfeit, e, s)
			ranges.Del(x.Orphaned, e, s)
			d.settleLost(e, s, emitted)
		}
	}
	if len(x.Forfeit) == 0 {
		x.Forfeit = nil
	}
}

// settleLost forgets split s of epoch e, not to be delivered again: the
// indices of emitted that no receipt covers are counted lost, and the
// split counts as lost.
func (d *DynamicState) settleLost(e, s int64, emitted ranges.Set) {
	x := d.Exact
	x.Counts.Lost += emitted.Minus(x.Delivered[e][s]).Len()
	ranges.Del(x.Delivered, e, s)
	d.countSettled(e, true)
}

// leaseCensus marks a lease of orphaned splits as a census (census mode).
func (d *DynamicState) leaseCensus(l *Lease) {
	x := d.Exact
	if x.Censusing == nil {
		x.Censusing = map[int64]map[int64]bool{}
	}
	for _, s := range l.Splits {
		ranges.Put(x.Censusing, l.Epoch, s, true)
	}
	l.Census = true
	x.Counts.Censused += int64(len(l.Splits))
}

// produceCensus settles a census split that its worker has run: what it
// emitted (the delivered indices were excluded) is lost. ok is false when
// s is not a census.
func (d *DynamicState) produceCensus(e, s int64, emitted ranges.Set) (ok bool) {
	x := d.Exact
	if _, ok := ranges.Get(x.Censusing, e, s); !ok {
		return false
	}
	x.uncensus(e, s)
	ranges.Del(x.Lenient, e, s) // a departure noted it; it delivers nothing anyway
	d.settleLost(e, s, emitted)
	return true
}

// uncensus takes split s of epoch e off the census list: run (Produce),
// or its census worker died or handed it back (then it is orphaned again,
// to be run by another worker).
func (x *ExactState) uncensus(e, s int64) {
	if _, ok := ranges.Get(x.Censusing, e, s); ok {
		ranges.Del(x.Censusing, e, s)
		if len(x.Censusing) == 0 {
			x.Censusing = nil
		}
	}
}

// CensusWaiting reports whether orphaned splits wait for a census that a
// node may run now (their fences are in). A job whose nodes are kept off
// (offload local) still lets them run it.
func (d *DynamicState) CensusWaiting() bool {
	x := d.Exact
	if x == nil || !x.Census {
		return false
	}
	for _, m := range x.Orphaned {
		for _, dead := range m {
			if len(x.Fences[dead]) == 0 {
				return true
			}
		}
	}
	return false
}

// validateCensus checks the census part of x against d.
func (x *ExactState) validateCensus(d *DynamicState) error {
	if !x.Census {
		if x.Censusing != nil || x.Forfeit != nil || x.Counts.Lost != 0 || x.Counts.Censused != 0 {
			return fmt.Errorf("exactly-once: census bookkeeping in a job without a census")
		}
		return nil
	}
	if d.Resume != nil {
		return fmt.Errorf("census: an at-most-once job is never resumed")
	}
	for e, m := range x.Censusing {
		if len(m) == 0 {
			return fmt.Errorf("census: empty censusing map of epoch %d", e)
		}
		for s, ok := range m {
			if _, out := d.Outstanding[e][s]; !ok || !out {
				return fmt.Errorf("census: split %d of epoch %d run as a census is not leased", s, e)
			}
		}
	}
	for e, m := range x.Forfeit {
		if len(m) == 0 {
			return fmt.Errorf("census: empty forfeit map of epoch %d", e)
		}
		for s, r := range m {
			if _, orph := x.Orphaned[e][s]; !orph {
				return fmt.Errorf("census: forfeit split %d of epoch %d is not orphaned", s, e)
			}
			if err := r.Validate(); err != nil {
				return fmt.Errorf("census: forfeit split %d of epoch %d: %w", s, e, err)
			}
		}
	}
	return nil
}
