package order

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestPermBijection: for sizes around powers of two (where the Feistel
// domain is largest against n) and several keys, At maps [0, n) onto
// [0, n) one to one and Inv undoes it.
func TestPermBijection(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 255, 256, 257, 1000, 1023, 4097, 65535, 65537} {
		for key := uint64(0); key < 5; key++ {
			p, err := NewPerm(n, key*7919)
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]bool, n)
			for i := range n {
				j := p.At(i)
				if j >= n {
					t.Fatalf("n=%d key=%d: At(%d)=%d out of range", n, key, i, j)
				}
				if seen[j] {
					t.Fatalf("n=%d key=%d: At(%d)=%d twice", n, key, i, j)
				}
				seen[j] = true
				if back := p.Inv(j); back != i {
					t.Fatalf("n=%d key=%d: Inv(At(%d)) = %d", n, key, i, back)
				}
			}
		}
	}
}

// TestPermLarge: a permutation of ~2^40 elements answers in range and
// inverts, without materializing anything.
func TestPermLarge(t *testing.T) {
	n := uint64(1)<<40 + 3
	p, err := NewPerm(n, 42)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		i := r.Uint64N(n)
		j := p.At(i)
		if j >= n || p.Inv(j) != i {
			t.Fatalf("At(%d)=%d, Inv=%d", i, j, p.Inv(j))
		}
	}
	if _, err := NewPerm(MaxPermSize, 1); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []uint64{0, MaxPermSize + 1, ^uint64(0)} {
		if _, err := NewPerm(bad, 1); !errors.Is(err, ErrPermSize) {
			t.Errorf("NewPerm(%d): %v, want ErrPermSize", bad, err)
		}
	}
}

// TestPermKeysDiffer: two keys give different permutations, and where an
// element lands is close to uniform over keys (a weak Feistel would pin
// it).
func TestPermKeysDiffer(t *testing.T) {
	const n = 1000
	a, _ := NewPerm(n, 1)
	b, _ := NewPerm(n, 2)
	same := 0
	for i := range uint64(n) {
		if a.At(i) == b.At(i) {
			same++
		}
	}
	if same > n/20 {
		t.Errorf("keys 1 and 2 agree on %d of %d positions", same, n)
	}
	const m, keys = 8, 16000
	var hist [m]int
	for k := range uint64(keys) {
		p, _ := NewPerm(m, k)
		hist[p.At(3)]++
	}
	for j, c := range hist {
		if c < keys/m*8/10 || c > keys/m*12/10 {
			t.Errorf("element 3 of 8 landed at %d %d times in %d keys (want about %d): %v", j, c, keys, keys/m, hist)
		}
	}
}

func TestKeyPaths(t *testing.T) {
	seen := map[uint64]string{}
	for name, k := range map[string]uint64{
		"s":      Key(1),
		"s,1":    Key(1, 1),
		"s,2":    Key(1, 2),
		"s,1,2":  Key(1, 1, 2),
		"s,2,1":  Key(1, 2, 1),
		"s,1,0":  Key(1, 1, 0),
		"s2,1":   Key(2, 1),
		"s,0":    Key(1, 0),
		"s,0,0":  Key(1, 0, 0),
		"s0":     Key(0),
		"s0,0":   Key(0, 0),
		"s,1,2,": Key(1, 1, 2, 0),
	} {
		if other, dup := seen[k]; dup {
			t.Errorf("Key %s == Key %s", name, other)
		}
		seen[k] = name
	}
}
