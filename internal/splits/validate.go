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
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case d == nil:
		return bad("nil")
	case d.NumSplits < 0 || d.NumSplits > MaxSplits:
		return bad("num splits %d outside [0, %d]", d.NumSplits, int64(MaxSplits))
	case d.Epochs < 0 || d.Epochs > jobspec.MaxEpochs:
		return bad("epochs %d outside [0, %d]", d.Epochs, jobspec.MaxEpochs)
	case d.Epoch < 0 || (d.Epochs > 0 && d.Epoch >= d.Epochs) || (d.NumSplits == 0 && d.Epoch != 0):
		return bad("epoch %d of %d", d.Epoch, d.Epochs)
	case d.Next < 0 || d.Next > d.NumSplits || (d.Next == d.NumSplits && !d.done()):
		return bad("next split %d of %d in epoch %d", d.Next, d.NumSplits, d.Epoch)
	case d.Outstanding == nil || d.PerEpoch == nil || d.LastLease == nil:
		return bad("missing map")
	}
	if _, ok := d.PerEpoch[d.Epoch]; !ok {
		return bad("no counts for the current epoch %d", d.Epoch)
	}
	if d.Ahead != nil && len(d.Ahead) == 0 {
		return bad("empty ahead map")
	}
	for s, ok := range d.Ahead {
		if !ok || s <= d.Next || s >= d.NumSplits {
			return bad("split %d taken ahead of the cursor at %d of %d", s, d.Next, d.NumSplits)
		}
	}
	var outstanding int64
	held := map[int64]int64{} // epoch → produced + orphaned (exactly-once)
	if x := d.Exact; x != nil {
		n, err := x.validate(d)
		if err != nil {
			return bad("%v", err)
		}
		held = n
		for _, k := range held {
			outstanding += k
		}
	}
	for e, m := range d.HandedBack {
		if len(m) == 0 {
			return bad("empty handed-back map of epoch %d", e)
		}
		for s, ok := range m {
			_, out := d.Outstanding[e][s]
			if x := d.Exact; x != nil {
				_, prod := x.Produced[e][s]
				_, orph := x.Orphaned[e][s]
				out = out || prod || orph
			}
			if !ok || out || e < 0 || e > d.Epoch || s < 0 || s >= d.NumSplits || (e == d.Epoch && s >= d.Next && !d.Ahead[s]) {
				return bad("handed-back split %d of epoch %d is also leased, or was never handed out", s, e)
			}
		}
	}
	for e, k := range d.handedBack() {
		held[e] += k
		outstanding += k
	}
	if r := d.Resume; r != nil {
		if err := r.validate(d); err != nil {
			return bad("%v", err)
		}
	}
	for e, out := range d.Outstanding {
		if e < 0 || e > d.Epoch || len(out) == 0 {
			return bad("outstanding leases of epoch %d (current %d): %d", e, d.Epoch, len(out))
		}
		if _, ok := d.PerEpoch[e]; !ok {
			return bad("no counts for epoch %d with outstanding leases", e)
		}
		for s := range out {
			if s < 0 || s >= d.NumSplits || (e == d.Epoch && s >= d.Next && !d.Ahead[s]) {
				return bad("outstanding split %d of epoch %d was never handed out", s, e)
			}
		}
		outstanding += int64(len(out))
	}
	var sum Counts
	for e, c := range d.PerEpoch {
		if e < 0 || e > d.Epoch || (e < d.Epoch && len(d.Outstanding[e]) == 0 && held[e] == 0) {
			return bad("counts kept for epoch %d (current %d)", e, d.Epoch)
		}
		want := d.NumSplits
		if e == d.Epoch {
			want = d.leasedInEpoch()
		}
		if c.Leased != want || c.Finished < 0 || c.Lost < 0 || c.Finished > c.Leased || c.Lost > c.Leased ||
			c.Leased-c.Finished-c.Lost != int64(len(d.Outstanding[e]))+held[e] {
			return bad("epoch %d counts %+v with %d outstanding and %d handed out", e, c, len(d.Outstanding[e]), want)
		}
		sum.Leased += c.Leased
		sum.Finished += c.Finished
		sum.Lost += c.Lost
	}
	t := d.Total
	if t.HandedBack < 0 {
		return bad("total counts %+v", t)
	}
	if t.Finished < sum.Finished || t.Lost < sum.Lost || t.Leased < sum.Leased || t.Finished < 0 || t.Lost < 0 ||
		t.Finished > t.Leased || t.Lost > t.Leased || t.Leased-t.Finished-t.Lost != outstanding {
		return bad("total counts %+v with %d outstanding", t, outstanding)
	}
	for w, r := range d.LastLease {
		l := r.Lease
		if len(l.Splits) > MaxLease || l.Epoch < 0 || l.Epoch > d.Epoch {
			return bad("last lease of %q: epoch %d, %d splits", w, l.Epoch, len(l.Splits))
		}
		for _, s := range l.Splits {
			if s < 0 || s >= d.NumSplits {
				return bad("last lease of %q holds split %d of %d", w, s, d.NumSplits)
			}
		}
	}
	return nil
}
