package ranges

import (
	"math/rand/v2"
	"testing"
)

// model is a plain set of indices that Ranges must agree with.
type model map[int64]bool

func (m model) ranges() Set {
	var idx []int64
	for i := range m {
		idx = append(idx, i)
	}
	return Of(idx...)
}

func TestRangesAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var r Set
		m := model{}
		for range rng.IntN(30) {
			lo := rng.Int64N(60)
			hi := lo + rng.Int64N(8)
			r.AddSpan(lo, hi)
			for i := lo; i < hi; i++ {
				m[i] = true
			}
			if err := r.Validate(); err != nil {
				t.Fatalf("round %d: after AddSpan(%d, %d): %v (%v)", round, lo, hi, err, r)
			}
		}
		want := m.ranges()
		if r.String() != want.String() {
			t.Fatalf("round %d: got %v, want %v", round, r, want)
		}
		if r.Len() != int64(len(m)) {
			t.Fatalf("round %d: Len %d, want %d", round, r.Len(), len(m))
		}
		for i := int64(-2); i < 72; i++ {
			if r.Contains(i) != m[i] {
				t.Fatalf("round %d: Contains(%d) = %v", round, i, r.Contains(i))
			}
			for j := i; j < i+5; j++ {
				all := true
				var in int64
				for k := i; k < j; k++ {
					all = all && m[k]
					if m[k] {
						in++
					}
				}
				if got := r.CountIn(i, j); got != in {
					t.Fatalf("round %d: CountIn(%d, %d) = %d, want %d", round, i, j, got, in)
				}
				if r.ContainsSpan(i, j) != all {
					t.Fatalf("round %d: ContainsSpan(%d, %d) = %v", round, i, j, !all)
				}
			}
		}
		// Set algebra against a second random set.
		o := model{}
		for range rng.IntN(20) {
			o[rng.Int64N(70)] = true
		}
		or := o.ranges()
		inter, minus := model{}, model{}
		for i := range m {
			if o[i] {
				inter[i] = true
			} else {
				minus[i] = true
			}
		}
		if got := r.Intersect(or); got.String() != inter.ranges().String() || got.Validate() != nil {
			t.Fatalf("round %d: %v ∩ %v = %v, want %v", round, r, or, got, inter.ranges())
		}
		if got := r.Minus(or); got.String() != minus.ranges().String() || got.Validate() != nil {
			t.Fatalf("round %d: %v − %v = %v, want %v", round, r, or, got, minus.ranges())
		}
		// Covers (the state machine's allocation-free check) against the
		// model, both ways round.
		if got, want := r.Covers(or), len(o) == len(inter); got != want {
			t.Fatalf("round %d: covers(%v, %v) = %v, want %v", round, r, or, got, want)
		}
		if got, want := or.Covers(r), len(minus) == 0; got != want {
			t.Fatalf("round %d: covers(%v, %v) = %v, want %v", round, or, r, got, want)
		}
		u := r.Clone()
		u.AddAll(or)
		for i := range o {
			m[i] = true
		}
		if u.String() != m.ranges().String() {
			t.Fatalf("round %d: union %v, want %v", round, u, m.ranges())
		}
	}
}

func TestRangesValidateRejects(t *testing.T) {
	for name, r := range map[string]Set{
		"odd":      {1, 2, 3},
		"negative": {-1, 2},
		"empty":    {3, 3},
		"reversed": {4, 2},
		"touching": {1, 3, 3, 5},
		"unsorted": {5, 6, 1, 2},
		"overlap":  {1, 5, 4, 8},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("%s: %v accepted", name, r)
		}
	}
	if err := (Set{0, 2, 4, 5}).Validate(); err != nil {
		t.Errorf("valid set rejected: %v", err)
	}
}

func TestRangesEach(t *testing.T) {
	var got []int64
	Of(5, 1, 2, 9).Each(func(i int64) bool { got = append(got, i); return len(got) < 3 })
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 5 {
		t.Fatalf("Each: %v", got)
	}
}
