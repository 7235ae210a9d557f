package ranges

import (
	"fmt"
)

// Delivered is what reached a trainer through one consumer of an
// exactly-once job, or, merged, through all of them (Merge).
type Delivered struct {
	// DoneBefore: every element of every epoch before it reached the
	// trainer(s), except Missing.
	DoneBefore int64 `cbor:"1,keyasint" json:"done_before"`
	// Missing (epochs < DoneBefore): epoch → split → indices that did not.
	Missing map[int64]map[int64]Set `cbor:"2,keyasint,omitempty" json:"missing,omitempty"`
	// Returned (epochs >= DoneBefore): epoch → split → indices that did.
	Returned map[int64]map[int64]Set `cbor:"3,keyasint,omitempty" json:"returned,omitempty"`
}

// Clone returns a deep copy.
func (p Delivered) Clone() Delivered {
	return Delivered{DoneBefore: p.DoneBefore, Missing: cloneRanges(p.Missing), Returned: cloneRanges(p.Returned)}
}

func cloneRanges(m map[int64]map[int64]Set) map[int64]map[int64]Set {
	if m == nil {
		return nil
	}
	c := make(map[int64]map[int64]Set, len(m))
	for e, in := range m {
		for s, r := range in {
			Put(c, e, s, r.Clone())
		}
	}
	return c
}

// Return records that indices [lo, hi) of split s of epoch e reached the
// trainer: off Missing before DoneBefore, into Returned from it on. It
// returns how many intervals Returned gained (at most 1).
func (p *Delivered) Return(e, s, lo, hi int64) (added int) {
	span := Set{lo, hi}
	if e < p.DoneBefore {
		if m := p.Missing[e][s].Minus(span); m.Empty() {
			Del(p.Missing, e, s)
		} else {
			p.Missing[e][s] = m
		}
		return 0
	}
	if p.Returned == nil {
		p.Returned = map[int64]map[int64]Set{}
	}
	have, _ := Get(p.Returned, e, s)
	n := have.Intervals()
	have.AddSpan(lo, hi)
	Put(p.Returned, e, s, have)
	return have.Intervals() - n
}

// Settle moves DoneBefore up to before, for a consumer that every element
// of the epochs in between went to: their Returned entries become the
// Missing ones, the indices still pending (received, not returned:
// epoch → split → indices).
func (p *Delivered) Settle(before int64, pending map[int64]map[int64]Set) {
	if before <= p.DoneBefore {
		return
	}
	for e := p.DoneBefore; e < before; e++ {
		delete(p.Returned, e)
		for s, r := range pending[e] {
			if p.Missing == nil {
				p.Missing = map[int64]map[int64]Set{}
			}
			Put(p.Missing, e, s, r.Clone())
		}
	}
	p.DoneBefore = before
	if len(p.Returned) == 0 {
		p.Returned = nil
	}
}

// Intervals is how many intervals p holds.
func (p Delivered) Intervals() int {
	n := 0
	for _, m := range []map[int64]map[int64]Set{p.Missing, p.Returned} {
		for _, in := range m {
			for _, r := range in {
				n += r.Intervals()
			}
		}
	}
	return n
}

// Validate checks p against a job of numSplits splits per epoch and epochs
// epochs (0: forever): epochs and splits in range, Missing only before
// DoneBefore and Returned only from it on, valid non-empty ranges, at
// most maxIntervals intervals in all. DoneBefore is at most maxEpochs
// even for a job that runs forever: a resumed job skips the epochs before
// it one by one (skipResumed), inside one Lease.
func (p Delivered) Validate(numSplits, epochs, maxEpochs int64, maxIntervals int) error {
	if p.DoneBefore < 0 || p.DoneBefore > maxEpochs || (epochs > 0 && p.DoneBefore > epochs) {
		return fmt.Errorf("delivered: done before epoch %d, job has %d epochs", p.DoneBefore, epochs)
	}
	if n := p.Intervals(); n > maxIntervals {
		return fmt.Errorf("delivered: %d intervals, limit %d", n, maxIntervals)
	}
	check := func(what string, m map[int64]map[int64]Set, ok func(e int64) bool) error {
		for e, in := range m {
			if !ok(e) || (epochs > 0 && e >= epochs) {
				return fmt.Errorf("delivered: %s in epoch %d (done before %d, %d epochs)", what, e, p.DoneBefore, epochs)
			}
			if len(in) == 0 {
				return fmt.Errorf("delivered: %s: empty epoch %d", what, e)
			}
			for s, r := range in {
				if s < 0 || s >= numSplits {
					return fmt.Errorf("delivered: %s: split %d of epoch %d, job has %d splits", what, s, e, numSplits)
				}
				if r.Empty() {
					return fmt.Errorf("delivered: %s: split %d of epoch %d: empty", what, s, e)
				}
				if err := r.Validate(); err != nil {
					return fmt.Errorf("delivered: %s: split %d of epoch %d: %w", what, s, e, err)
				}
			}
		}
		return nil
	}
	if err := check("missing", p.Missing, func(e int64) bool { return e >= 0 && e < p.DoneBefore }); err != nil {
		return err
	}
	return check("returned", p.Returned, func(e int64) bool { return e >= p.DoneBefore })
}

// Merge folds o into p: what reached the trainers through either.
// Only one consumer's checkpoint can claim an epoch done (it was then the
// job's only consumer), but if both do, an element is missing only if
// both miss it; what either returned is never missing.
func (p *Delivered) Merge(o Delivered) {
	hi := max(p.DoneBefore, o.DoneBefore)
	out := Delivered{DoneBefore: hi, Missing: map[int64]map[int64]Set{}, Returned: map[int64]map[int64]Set{}}
	missing := func(d Delivered, e int64) (map[int64]Set, bool) { return d.Missing[e], e < d.DoneBefore }
	epochs := map[int64]bool{}
	for _, d := range []Delivered{*p, o} {
		for _, m := range []map[int64]map[int64]Set{d.Missing, d.Returned} {
			for e := range m {
				epochs[e] = true
			}
		}
	}
	for e := range epochs {
		if e >= hi {
			for _, d := range []Delivered{*p, o} {
				for s, r := range d.Returned[e] {
					have := out.Returned[e][s].Clone()
					have.AddAll(r)
					Put(out.Returned, e, s, have)
				}
			}
			continue
		}
		// e < hi: at least one side claims it done.
		mp, pc := missing(*p, e)
		mo, oc := missing(o, e)
		var miss map[int64]Set
		var returned []map[int64]Set
		switch {
		case pc && oc:
			miss = map[int64]Set{}
			for s, r := range mp {
				if x := r.Intersect(mo[s]); !x.Empty() {
					miss[s] = x
				}
			}
		case pc:
			miss, returned = mp, append(returned, o.Returned[e])
		default:
			miss, returned = mo, append(returned, p.Returned[e])
		}
		for s, r := range miss {
			for _, ret := range returned {
				r = r.Minus(ret[s])
			}
			if !r.Empty() {
				Put(out.Missing, e, s, r.Clone())
			}
		}
	}
	if len(out.Missing) == 0 {
		out.Missing = nil
	}
	if len(out.Returned) == 0 {
		out.Returned = nil
	}
	*p = out
}

// SplitEmitted is one entry of Produce.
type SplitEmitted struct {
	Split   int64 `cbor:"1,keyasint" json:"split"`
	Emitted Set   `cbor:"2,keyasint" json:"emitted"`
}

// The exactly-once bookkeeping keeps element sets per epoch and split:
// epoch → split → Set. Put, Get and Del keep such two-level maps free of
// empty inner maps.

func Put[V any](m map[int64]map[int64]V, e, s int64, v V) {
	in := m[e]
	if in == nil {
		in = map[int64]V{}
		m[e] = in
	}
	in[s] = v
}

func Del[V any](m map[int64]map[int64]V, e, s int64) {
	if in := m[e]; in != nil {
		delete(in, s)
		if len(in) == 0 {
			delete(m, e)
		}
	}
}

func Get[V any](m map[int64]map[int64]V, e, s int64) (V, bool) {
	v, ok := m[e][s]
	return v, ok
}
