package splits

import (
	"math/rand/v2"
	"testing"
)

func TestPreferHeld(t *testing.T) {
	cases := []struct {
		name      string
		n         int
		next, num int64
		held      Ranges
		limit     int
		want      int
	}{
		{"no holdings", 4, 10, 100, nil, 64, 4},
		{"holds the cursor's run: takes all of it", 4, 10, 100, Span(10, 30), 64, 20},
		{"holds a short run at the cursor: still n", 4, 10, 100, Span(10, 12), 64, 4},
		{"run capped by limit", 4, 10, 100, Span(0, 100), 16, 16},
		{"run capped by the epoch's end", 4, 90, 100, Span(80, 200), 64, 10},
		{"holds splits just ahead: stops before them", 8, 10, 100, Span(13, 20), 64, 3},
		{"holds splits far ahead: n", 4, 10, 100, Span(50, 60), 64, 4},
		{"holds the next but one", 4, 10, 100, RangesOf(11), 64, 1},
		{"cursor past the end", 4, 100, 100, Span(0, 100), 64, 4},
		{"n clamped to the limit", 100, 0, 1000, nil, 64, 64},
		{"n at least 1", 0, 0, 10, nil, 64, 1},
	}
	for _, c := range cases {
		if got := PreferHeld(c.n, c.next, c.num, c.held, c.limit); got != c.want {
			t.Errorf("%s: PreferHeld(%d, %d, %d, %v, %d) = %d, want %d", c.name, c.n, c.next, c.num, c.held, c.limit, got, c.want)
		}
	}
}

// Properties: the size is in [1, limit]; a lease of that size from the
// cursor is all held or all not held (it never mixes a worker's splits
// with others' unless n forces it: only when the cursor's run is shorter
// than n).
func TestPreferHeldProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		num := rng.Int64N(200) + 1
		var held Ranges
		for range rng.IntN(6) {
			lo := rng.Int64N(num)
			held.AddSpan(lo, lo+rng.Int64N(20)+1)
		}
		n, limit := rng.IntN(40), rng.IntN(64)+1
		next := rng.Int64N(num + 1)
		got := PreferHeld(n, next, num, held, limit)
		if got < 1 || got > limit {
			t.Fatalf("PreferHeld(%d, %d, %d, %v, %d) = %d, out of [1, %d]", n, next, num, held, limit, got, limit)
		}
		if next < num && !held.Contains(next) {
			for s := next; s < next+int64(got) && s < num; s++ {
				if held.Contains(s) {
					t.Fatalf("PreferHeld(%d, %d, %d, %v, %d) = %d hands the worker its own split %d behind others'", n, next, num, held, limit, got, s)
				}
			}
		}
	}
}
