package splits

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// Receipts (exactly-once, exactly.go): what consumers report they
// received, by (epoch, split, element index), which settles the splits
// whose emitted indices it covers.

// Receive records that consumer received the elements got of split s of
// epoch. Receipts of elements received before count as Duplicates; of a
// split already settled, they take back what a departure counted as
// abandoned (or, if none was, count as Duplicates). A receipt naming a
// split never handed out is an error and changes nothing.
func (d *DynamicState) Receive(consumer string, epoch, s int64, got ranges.Set) error {
	x := d.Exact
	if x == nil {
		return fmt.Errorf("%w: Receive on an at-most-once job", ErrExactlyOnce)
	}
	if err := d.CheckReceipt(epoch, s, got); err != nil {
		return err
	}
	if got.Empty() {
		return nil
	}
	x.addReceiver(consumer)
	_, out := ranges.Get(d.Outstanding, epoch, s)
	_, prod := ranges.Get(x.Produced, epoch, s)
	_, orph := ranges.Get(x.Orphaned, epoch, s)
	if !out && !prod && !orph && !d.HandedBack[epoch][s] {
		// Settled (or its epoch forgotten): late receipts.
		if rest, ok := ranges.Get(x.Unreceipted, epoch, s); ok {
			back := rest.Intersect(got)
			x.Counts.Abandoned -= back.Len()
			x.Counts.Delivered += back.Len()
			x.Counts.Duplicates += got.Len() - back.Len()
			if rest = rest.Minus(got); rest.Empty() {
				ranges.Del(x.Unreceipted, epoch, s)
			} else {
				ranges.Put(x.Unreceipted, epoch, s, rest)
			}
			return nil
		}
		x.Counts.Duplicates += got.Len()
		return nil
	}
	have := x.Delivered[epoch][s]
	var dup int64
	for i := 0; i+1 < len(got); i += 2 {
		dup += have.CountIn(got[i], got[i+1])
	}
	x.Counts.Duplicates += dup
	x.Counts.Delivered += got.Len() - dup
	have = have.Clone()
	have.AddAll(got)
	ranges.Put(x.Delivered, epoch, s, have)
	if p, ok := ranges.Get(x.Produced, epoch, s); ok && have.Covers(p.Emitted) {
		d.settle(epoch, s, false)
	}
	return nil
}

// CheckReceipt returns the error Receive would return, changing nothing.
func (d *DynamicState) CheckReceipt(epoch, s int64, got ranges.Set) error {
	if d.Exact == nil {
		return fmt.Errorf("%w: Receive on an at-most-once job", ErrExactlyOnce)
	}
	if got.Intervals() > jobspec.MaxReceiptIntervals {
		return fmt.Errorf("receipt of epoch %d split %d: %d intervals, limit %d", epoch, s, got.Intervals(), jobspec.MaxReceiptIntervals)
	}
	if err := got.Validate(); err != nil {
		return fmt.Errorf("receipt of epoch %d split %d: %w", epoch, s, err)
	}
	if epoch < 0 || epoch > d.Epoch || s < 0 || s >= d.NumSplits || !d.handedOut(epoch, s) {
		return fmt.Errorf("receipt of epoch %d split %d: never handed out (epoch %d, next %d of %d)", epoch, s, d.Epoch, d.Next, d.NumSplits)
	}
	return nil
}

// NewReport reports whether report seq of consumer has not been applied
// yet (seq 0: unnumbered, always new), and records it as applied: call it
// only when the report will be applied.
func (d *DynamicState) NewReport(consumer string, seq uint64) bool {
	x := d.Exact
	if x == nil || seq == 0 {
		return true
	}
	if seq <= x.ReceiptSeq[consumer] {
		return false
	}
	if x.ReceiptSeq == nil {
		x.ReceiptSeq = map[string]uint64{}
	}
	x.ReceiptSeq[consumer] = seq
	return true
}
