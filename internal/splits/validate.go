package splits

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// Validate checks every invariant of d. The state machine (internal/fsm)
// calls it on a DynamicState decoded from a snapshot, which is input from
// disk or the network: one that passes is safe to use, one that fails
// must be refused.
// The error wraps ErrInvalid and names the broken invariant.
func (d *DynamicState) Validate() error {
	if d == nil {
		return invalid("nil")
	}
	if err := d.validateCursor(); err != nil {
		return err
	}
	held, err := d.validateHeld()
	if err != nil {
		return err
	}
	if r := d.Resume; r != nil {
		if err := r.validate(d); err != nil {
			return invalid("%v", err)
		}
	}
	if err := d.validateOutstanding(); err != nil {
		return err
	}
	if err := d.validateCounts(held); err != nil {
		return err
	}
	return d.validateLastLeases()
}

// invalid is the error of a broken invariant: ErrInvalid, and what broke.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// validateCursor checks the bounds, the epoch and the cursor (Next, and
// the splits taken ahead of it).
func (d *DynamicState) validateCursor() error {
	switch {
	case d.NumSplits < 0 || d.NumSplits > MaxSplits:
		return invalid("num splits %d outside [0, %d]", d.NumSplits, int64(MaxSplits))
	case d.Epochs < 0 || d.Epochs > jobspec.MaxEpochs:
		return invalid("epochs %d outside [0, %d]", d.Epochs, jobspec.MaxEpochs)
	case d.Epoch < 0 || (d.Epochs > 0 && d.Epoch >= d.Epochs) || (d.NumSplits == 0 && d.Epoch != 0):
		return invalid("epoch %d of %d", d.Epoch, d.Epochs)
	case d.Next < 0 || d.Next > d.NumSplits || (d.Next == d.NumSplits && !d.done()):
		return invalid("next split %d of %d in epoch %d", d.Next, d.NumSplits, d.Epoch)
	case d.Outstanding == nil || d.PerEpoch == nil || d.LastLease == nil:
		return invalid("missing map")
	}
	if _, ok := d.PerEpoch[d.Epoch]; !ok {
		return invalid("no counts for the current epoch %d", d.Epoch)
	}
	if d.Ahead != nil && len(d.Ahead) == 0 {
		return invalid("empty ahead map")
	}
	for s, ok := range d.Ahead {
		if !ok || s <= d.Next || s >= d.NumSplits {
			return invalid("split %d taken ahead of the cursor at %d of %d", s, d.Next, d.NumSplits)
		}
	}
	return nil
}

// validateHeld checks the splits handed out that are neither leased nor
// settled: produced or orphaned (exactly-once), or handed back. It returns
// how many there are per epoch, which the counts must account for.
func (d *DynamicState) validateHeld() (map[int64]int64, error) {
	held := map[int64]int64{} // epoch → produced + orphaned + handed back
	if x := d.Exact; x != nil {
		n, err := x.validate(d)
		if err != nil {
			return nil, invalid("%v", err)
		}
		held = n
	}
	for e, m := range d.HandedBack {
		if len(m) == 0 {
			return nil, invalid("empty handed-back map of epoch %d", e)
		}
		for s, ok := range m {
			_, out := d.Outstanding[e][s]
			if x := d.Exact; x != nil {
				_, prod := x.Produced[e][s]
				_, orph := x.Orphaned[e][s]
				out = out || prod || orph
			}
			if !ok || out || e < 0 || e > d.Epoch || s < 0 || s >= d.NumSplits || (e == d.Epoch && s >= d.Next && !d.Ahead[s]) {
				return nil, invalid("handed-back split %d of epoch %d is also leased, or was never handed out", s, e)
			}
		}
	}
	for e, k := range d.handedBack() {
		held[e] += k
	}
	return held, nil
}

// validateOutstanding checks the leases outstanding: each of a split
// handed out, in an epoch that has counts.
func (d *DynamicState) validateOutstanding() error {
	for e, out := range d.Outstanding {
		if e < 0 || e > d.Epoch || len(out) == 0 {
			return invalid("outstanding leases of epoch %d (current %d): %d", e, d.Epoch, len(out))
		}
		if _, ok := d.PerEpoch[e]; !ok {
			return invalid("no counts for epoch %d with outstanding leases", e)
		}
		for s := range out {
			if s < 0 || s >= d.NumSplits || (e == d.Epoch && s >= d.Next && !d.Ahead[s]) {
				return invalid("outstanding split %d of epoch %d was never handed out", s, e)
			}
		}
	}
	return nil
}

// validateCounts checks that the counts, per epoch and in total, add up:
// what was leased is finished, lost, outstanding, or held (validateHeld).
func (d *DynamicState) validateCounts(held map[int64]int64) error {
	var outstanding int64
	for _, k := range held {
		outstanding += k
	}
	for _, out := range d.Outstanding {
		outstanding += int64(len(out))
	}
	var sum Counts
	for e, c := range d.PerEpoch {
		if e < 0 || e > d.Epoch || (e < d.Epoch && len(d.Outstanding[e]) == 0 && held[e] == 0) {
			return invalid("counts kept for epoch %d (current %d)", e, d.Epoch)
		}
		want := d.NumSplits
		if e == d.Epoch {
			want = d.leasedInEpoch()
		}
		if c.Leased != want || c.Finished < 0 || c.Lost < 0 || c.Finished > c.Leased || c.Lost > c.Leased ||
			c.Leased-c.Finished-c.Lost != int64(len(d.Outstanding[e]))+held[e] {
			return invalid("epoch %d counts %+v with %d outstanding and %d handed out", e, c, len(d.Outstanding[e]), want)
		}
		sum.Leased += c.Leased
		sum.Finished += c.Finished
		sum.Lost += c.Lost
	}
	t := d.Total
	if t.HandedBack < 0 {
		return invalid("total counts %+v", t)
	}
	if t.Finished < sum.Finished || t.Lost < sum.Lost || t.Leased < sum.Leased || t.Finished < 0 || t.Lost < 0 ||
		t.Finished > t.Leased || t.Lost > t.Leased || t.Leased-t.Finished-t.Lost != outstanding {
		return invalid("total counts %+v with %d outstanding", t, outstanding)
	}
	return nil
}

// validateLastLeases checks the leases kept for retries.
func (d *DynamicState) validateLastLeases() error {
	for w, r := range d.LastLease {
		l := r.Lease
		if len(l.Splits) > MaxLease || l.Epoch < 0 || l.Epoch > d.Epoch {
			return invalid("last lease of %q: epoch %d, %d splits", w, l.Epoch, len(l.Splits))
		}
		for _, s := range l.Splits {
			if s < 0 || s >= d.NumSplits {
				return invalid("last lease of %q holds split %d of %d", w, s, d.NumSplits)
			}
		}
	}
	return nil
}
