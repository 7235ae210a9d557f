package order

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomRanges(r *rand.Rand, n int, span uint64) []Range {
	var rs []Range
	for range n {
		lo := r.Uint64N(span)
		rs = append(rs, Range{lo, lo + 1 + r.Uint64N(8)})
	}
	return rs
}

// TestGapsSelectRank: against a brute-force list of kept positions.
func TestGapsSelectRank(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 300 {
		g := NewGaps(randomRanges(r, r.IntN(12), 200)...)
		var kept []uint64
		for p := range uint64(400) {
			if !g.Contains(p) {
				kept = append(kept, p)
			}
		}
		for i, p := range kept {
			if got := g.Select(uint64(i)); got != p {
				t.Fatalf("trial %d %v: Select(%d) = %d, want %d", trial, g.r, i, got, p)
			}
			if got := g.Rank(p); got != uint64(i) {
				t.Fatalf("trial %d %v: Rank(%d) = %d, want %d", trial, g.r, p, got, i)
			}
		}
		for i := 1; i < len(g.r); i++ {
			if g.r[i].Lo <= g.r[i-1].Hi {
				t.Fatalf("gaps not disjoint and apart: %v", g.r)
			}
		}
	}
}

// kept lists the kept positions of c from its start below h.
func kept(c Cut, h uint64) []uint64 {
	var out []uint64
	for p := c.Start; p < h; p++ {
		if !c.Gaps.Contains(p) {
			out = append(out, p)
		}
	}
	return out
}

// TestCutPartition: the N consumers' shares are disjoint and together are
// the kept positions, in order, the r-th to consumer r mod N; a skip drops
// exactly its range.
func TestCutPartition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	for trial := range 200 {
		n := 1 + r.Uint64N(9)
		skips := randomRanges(r, r.IntN(4), 300)
		c := Cut{Start: r.Uint64N(20), Gaps: NewGaps(skips...), N: n}
		want := kept(c, 400)
		got := make([]uint64, 0, len(want))
		for rr := range uint64(len(want)) {
			p, err := c.Nth(rr%n, rr/n)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: interleaved shares %v, want %v", trial, got, want)
		}
		for _, p := range got {
			for _, s := range skips {
				if p >= s.Lo && p < s.Hi {
					t.Fatalf("trial %d: position %d in skip %v delivered", trial, p, s)
				}
			}
		}
	}
	if _, err := (Cut{N: 2}).Nth(2, 0); !errors.Is(err, ErrCut) {
		t.Errorf("consumer 2 of 2: %v", err)
	}
	if _, err := (Cut{N: 0}).Nth(0, 0); !errors.Is(err, ErrCut) {
		t.Errorf("consumer of 0: %v", err)
	}
}

// TestSkipExactRange: skipping global batches [41000, 41500) of an epoch
// delivers every batch before and after, and none of them, at any N.
func TestSkipExactRange(t *testing.T) {
	for _, n := range []uint64{1, 3, 8} {
		c := Cut{Gaps: NewGaps(Range{41000, 41500}), N: n}
		var prev uint64
		for rr := range uint64(42000) {
			p, err := c.Nth(rr%n, rr/n)
			if err != nil {
				t.Fatal(err)
			}
			want := rr
			if rr >= 41000 {
				want += 500
			}
			if p != want || (rr > 0 && p <= prev) {
				t.Fatalf("N=%d: the %d-th delivered batch is %d, want %d", n, rr, p, want)
			}
			prev = p
		}
	}
}

// progressPattern gives N consumers' progress: all at one step, or some
// ahead by a step or two (checkpoints taken between steps).
func progressPattern(r *rand.Rand, n uint64) []ConsumerProgress {
	base := r.Uint64N(30)
	ps := make([]ConsumerProgress, n)
	mode := r.IntN(3)
	for i := range ps {
		ps[i] = ConsumerProgress{Index: uint64(i), Next: base}
		switch mode {
		case 1: // a prefix of ranks one step ahead
			if uint64(i) < n/2 {
				ps[i].Next++
			}
		case 2: // anything within two steps
			ps[i].Next += r.Uint64N(3)
		}
	}
	r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	return ps
}

// TestMergeCoversRemainingOnce: for any N → N2 (and a second resume
// N2 → N3), what the old consumers were given and what the new cut gives
// are every kept position exactly once, skips excluded.
func TestMergeCoversRemainingOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 5))
	const h = 600
	for trial := range 500 {
		c := Cut{N: 1 + r.Uint64N(8), Gaps: NewGaps(randomRanges(r, r.IntN(4), 400)...)}
		want := kept(c, h)
		count := map[uint64]int{}
		for hop := range 2 {
			ps := progressPattern(r, c.N)
			for _, p := range ps {
				for k := range p.Next {
					pos, err := c.Nth(p.Index, k)
					if err != nil {
						t.Fatal(err)
					}
					count[pos]++
				}
			}
			n2 := 1 + r.Uint64N(9)
			next, err := Merge(c, ps, n2, MaxAhead)
			if err != nil {
				t.Fatalf("trial %d hop %d: %v", trial, hop, err)
			}
			if next.N != n2 {
				t.Fatalf("merged cut has %d consumers, want %d", next.N, n2)
			}
			c = next
		}
		// The last cut delivers the rest.
		for rr := uint64(0); ; rr++ {
			pos, err := c.Nth(rr%c.N, rr/c.N)
			if err != nil {
				t.Fatal(err)
			}
			if pos >= h {
				break
			}
			count[pos]++
		}
		for _, p := range want {
			if count[p] != 1 {
				t.Fatalf("trial %d: position %d delivered %d times", trial, p, count[p])
			}
			delete(count, p)
		}
		for p, n := range count {
			if p < h {
				t.Fatalf("trial %d: position %d (skipped) delivered %d times", trial, p, n)
			}
		}
	}
}

// TestMergeOrderKeepsGlobalSequence: after a resume of consumers that were
// all at one step, the new cut continues the same global sequence: its
// interleaved shares are the old cut's remaining positions, in order.
func TestMergeOrderKeepsGlobalSequence(t *testing.T) {
	old := Cut{N: 4, Gaps: NewGaps(Range{50, 60})}
	ps := []ConsumerProgress{{0, 20}, {1, 20}, {2, 20}, {3, 20}}
	next, err := Merge(old, ps, 3, MaxAhead)
	if err != nil {
		t.Fatal(err)
	}
	for rr := range uint64(200) {
		a, _ := old.Nth((80+rr)%4, (80+rr)/4)
		b, _ := next.Nth(rr%3, rr/3)
		if a != b {
			t.Fatalf("the %d-th batch after the resume: %d, uninterrupted %d", rr, b, a)
		}
	}
}

func TestMergeRefuses(t *testing.T) {
	c := Cut{N: 3}
	for name, ps := range map[string][]ConsumerProgress{
		"missing":   {{0, 1}, {1, 1}},
		"twice":     {{0, 1}, {0, 1}, {1, 1}},
		"outside":   {{0, 1}, {1, 1}, {3, 1}},
		"far apart": {{0, 0}, {1, MaxAheadPositions}, {2, 0}},
	} {
		if _, err := Merge(c, ps, 2, MaxAhead); !errors.Is(err, ErrCut) {
			t.Errorf("%s: %v, want ErrCut", name, err)
		}
	}
	// Many scattered ranks ahead: more ranges than a checkpoint holds.
	var ps []ConsumerProgress
	for i := range uint64(64) {
		ps = append(ps, ConsumerProgress{Index: i, Next: 1 + i%2})
	}
	if _, err := Merge(Cut{N: 64}, ps, 8, MaxAhead); !errors.Is(err, ErrCut) {
		t.Errorf("32 scattered ranges ahead: %v, want ErrCut", err)
	}
	if _, err := Merge(c, []ConsumerProgress{{0, 1}, {1, 1}, {2, 1}}, 0, MaxAhead); !errors.Is(err, ErrCut) {
		t.Errorf("resume on 0 consumers: %v", err)
	}
}
