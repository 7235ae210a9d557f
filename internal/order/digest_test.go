package order

import (
	"math/rand/v2"
	"testing"
)

func digestOf(key uint64, ids []uint64) Digest {
	var d Digest
	for _, id := range ids {
		d.Add(key, 0, id)
	}
	return d
}

// TestDigestEqualIffSameMultiset: the digest ignores order and batching
// (consumers' and windows' digests add up to the epoch's), and changes
// when one element is dropped, replaced by another, or duplicated in
// place of another.
func TestDigestEqualIffSameMultiset(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	key := DigestKey(1234, 0)
	for trial := range 300 {
		n := 1 + r.IntN(2000)
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = uint64(i)
		}
		whole := digestOf(key, ids)
		r.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		// Cut into up to 5 consumers' digests, added back up.
		var sum Digest
		for c, lo := 0, 0; lo < n; c++ {
			hi := min(n, lo+1+r.IntN(n))
			sum = sum.Plus(digestOf(key, ids[lo:hi]))
			lo = hi
		}
		if sum != whole {
			t.Fatalf("trial %d: parts add to %v, whole %v", trial, sum, whole)
		}
		i := r.IntN(n)
		dropped := digestOf(key, append(append([]uint64{}, ids[:i]...), ids[i+1:]...))
		if dropped == whole || dropped.Count != whole.Count-1 {
			t.Fatalf("trial %d: dropping element %d went unnoticed", trial, ids[i])
		}
		for l := range whole.Sum {
			if dropped.Sum[l] == whole.Sum[l] {
				t.Fatalf("trial %d: lane %d blind to a dropped element", trial, l)
			}
		}
		if n > 1 {
			dup := append([]uint64{}, ids...)
			j := (i + 1) % n
			dup[i] = dup[j] // one element twice, one missing: same count
			d := digestOf(key, dup)
			if d == whole || d.Count != whole.Count {
				t.Fatalf("trial %d: a duplicate in place of a dropped element went unnoticed", trial)
			}
		}
		other := append([]uint64{}, ids...)
		other[i] = uint64(n) + r.Uint64N(1000) // an element outside the set
		if digestOf(key, other) == whole {
			t.Fatalf("trial %d: a replaced element went unnoticed", trial)
		}
	}
	// Keys, sources: the same ids under another epoch's key or source
	// digest differently.
	a, b, c := Digest{}, Digest{}, Digest{}
	a.Add(DigestKey(1, 0), 0, 7)
	b.Add(DigestKey(1, 1), 0, 7)
	c.Add(DigestKey(1, 0), 1, 7)
	if a == b || a == c {
		t.Error("epoch or source does not change the digest")
	}
}

func TestDigestEncoding(t *testing.T) {
	d := digestOf(DigestKey(9, 9), []uint64{1, 2, 3})
	b, _ := d.MarshalBinary()
	var e Digest
	if err := e.UnmarshalBinary(b); err != nil || e != d || len(d.String()) != 2*DigestLen {
		t.Fatalf("round trip: %v %v %q", e, err, d)
	}
	if err := e.UnmarshalBinary(b[:39]); err == nil {
		t.Error("39 bytes decoded")
	}
}
