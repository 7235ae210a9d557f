package order

import (
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomStages(r *rand.Rand, k int, window uint64) []Stage {
	var st []Stage
	var from uint64
	for s := range 1 + r.IntN(3) {
		if s > 0 {
			from += 1 + r.Uint64N(3)
		}
		counts := make([]uint64, k)
		left := window
		for i := range k - 1 {
			if r.IntN(4) == 0 {
				continue // a source off in this stage
			}
			c := r.Uint64N(left + 1)
			counts[i] = c
			left -= c
		}
		counts[k-1] = left
		r.Shuffle(k, func(i, j int) { counts[i], counts[j] = counts[j], counts[i] })
		st = append(st, Stage{From: from, Counts: counts})
	}
	return st
}

// TestMixtureExactPerWindow: in every window each source takes exactly its
// stage's count; each source's own positions come in order 0, 1, 2…
// (each once); Taken agrees; the same mixture twice gives the same
// stream; interleaving is smooth (a source's count in any prefix of a
// window is within the tree's depth of its share).
func TestMixtureExactPerWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	for trial := range 300 {
		k := 1 + r.IntN(7)
		window := 1 + r.Uint64N(60)
		stages := randomStages(r, k, window)
		seed := r.Uint64()
		m, err := NewMixture(window, seed, stages)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		m2, _ := NewMixture(window, seed, stages)
		depth := bits.Len(uint(k)) + 1
		next := make([]uint64, k)
		windows := stages[len(stages)-1].From + 3
		for w := range windows {
			st := stages[sortStage(stages, w)]
			got := make([]uint64, k)
			for o := range window {
				j := w*window + o
				src, u := m.At(j)
				if s2, u2 := m2.At(j); s2 != src || u2 != u {
					t.Fatalf("trial %d: two builds differ at %d", trial, j)
				}
				if src < 0 || src >= k {
					t.Fatalf("trial %d: source %d of %d", trial, src, k)
				}
				if u != next[src] {
					t.Fatalf("trial %d: position %d takes source %d's %d-th, want its %d-th", trial, j, src, u, next[src])
				}
				if taken := m.Taken(src, j); taken != u {
					t.Fatalf("trial %d: Taken(%d, %d) = %d, want %d", trial, src, j, taken, u)
				}
				next[src]++
				got[src]++
				for s := range k {
					share := float64(st.Counts[s]) * float64(o+1) / float64(window)
					if math.Abs(float64(got[s])-share) > float64(depth) {
						t.Fatalf("trial %d: source %d has %d of the first %d positions of window %d, share %.1f", trial, s, got[s], o+1, w, share)
					}
				}
			}
			if !slices.Equal(got, st.Counts) {
				t.Fatalf("trial %d window %d: counts %v, want %v", trial, w, got, st.Counts)
			}
		}
	}
}

func sortStage(st []Stage, w uint64) int {
	s := 0
	for i := range st {
		if st[i].From <= w {
			s = i
		}
	}
	return s
}

// TestMixtureSeeds: another seed interleaves differently (same counts).
func TestMixtureSeeds(t *testing.T) {
	st := []Stage{{Counts: []uint64{70, 20, 10}}}
	a, _ := NewMixture(100, 1, st)
	b, _ := NewMixture(100, 2, st)
	diff := 0
	for j := range uint64(1000) {
		sa, _ := a.At(j)
		sb, _ := b.At(j)
		if sa != sb {
			diff++
		}
	}
	if diff < 50 {
		t.Errorf("seeds 1 and 2 differ at only %d of 1000 positions", diff)
	}
}

func TestApportion(t *testing.T) {
	c, err := Apportion(10, []float64{0.7, 0.2, 0.1})
	if err != nil || !slices.Equal(c, []uint64{7, 2, 1}) {
		t.Fatalf("0.7/0.2/0.1 of 10: %v %v", c, err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	for range 500 {
		k := 1 + r.IntN(8)
		w := make([]float64, k)
		var sum float64
		for i := range w {
			if r.IntN(5) > 0 {
				w[i] = r.Float64() * 10
			}
			sum += w[i]
		}
		if sum == 0 {
			w[0], sum = 1, 1
		}
		window := 1 + r.Uint64N(1000)
		c, err := Apportion(window, w)
		if err != nil {
			t.Fatal(err)
		}
		var total uint64
		for i, x := range c {
			q := float64(window) * w[i] / sum
			if math.Abs(float64(x)-q) >= 1 || (w[i] == 0 && x != 0) {
				t.Fatalf("weights %v window %d: count %d of source %d, quota %.3f", w, window, x, i, q)
			}
			total += x
		}
		if total != window {
			t.Fatalf("counts %v sum to %d, not %d", c, total, window)
		}
	}
	for _, bad := range [][]float64{nil, {0, 0}, {-1, 2}, {math.NaN()}, {math.Inf(1), 1}} {
		if _, err := Apportion(10, bad); !errors.Is(err, ErrMixture) {
			t.Errorf("Apportion(%v): %v", bad, err)
		}
	}
}

func TestMixtureRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		window uint64
		st     []Stage
	}{
		"no window":     {0, []Stage{{Counts: []uint64{0}}}},
		"no stage":      {4, nil},
		"no source":     {4, []Stage{{Counts: nil}}},
		"late start":    {4, []Stage{{From: 1, Counts: []uint64{4}}}},
		"wrong sum":     {4, []Stage{{Counts: []uint64{1, 2}}}},
		"overflow":      {4, []Stage{{Counts: []uint64{math.MaxUint64, 5}}}},
		"unsorted":      {4, []Stage{{Counts: []uint64{4}}, {From: 0, Counts: []uint64{4}}}},
		"source change": {4, []Stage{{Counts: []uint64{4}}, {From: 2, Counts: []uint64{2, 2}}}},
	} {
		if _, err := NewMixture(c.window, 1, c.st); !errors.Is(err, ErrMixture) {
			t.Errorf("%s: %v, want ErrMixture", name, err)
		}
	}
}

// TestMixtureOverLayouts: a mixture of three sources of different sizes,
// each with its own layout per pass: over a long stream every source's
// pass is each of its elements once (a source that runs out starts its
// next pass, reshuffled), and the stream is the same computed twice.
func TestMixtureOverLayouts(t *testing.T) {
	sizes := []uint64{1000, 301, 57}
	counts, err := Apportion(100, []float64{0.7, 0.2, 0.1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMixture(100, 42, []Stage{{Counts: counts}, {From: 20, Counts: []uint64{50, 30, 20}}})
	if err != nil {
		t.Fatal(err)
	}
	layouts := map[[2]uint64]Layout{}
	elem := func(src int, u uint64) uint64 {
		pass, pos := u/sizes[src], u%sizes[src]
		k := [2]uint64{uint64(src), pass}
		l, ok := layouts[k]
		if !ok {
			l, err = NewLayout(sizes[src], 16, 4, Key(42, uint64(src)), pass)
			if err != nil {
				t.Fatal(err)
			}
			layouts[k] = l
		}
		id, err := l.At(pos)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	seen := map[[3]uint64]int{} // (source, pass, id)
	passOrder := map[[2]uint64][]uint64{}
	for j := range uint64(6000) {
		src, u := m.At(j)
		id := elem(src, u)
		pass := u / sizes[src]
		seen[[3]uint64{uint64(src), pass, id}]++
		passOrder[[2]uint64{uint64(src), pass}] = append(passOrder[[2]uint64{uint64(src), pass}], id)
	}
	for k, ids := range passOrder {
		for _, id := range ids {
			if seen[[3]uint64{k[0], k[1], id}] != 1 {
				t.Fatalf("source %d pass %d: element %d seen %d times", k[0], k[1], id, seen[[3]uint64{k[0], k[1], id}])
			}
		}
		if n := uint64(len(ids)); n > sizes[k[0]] {
			t.Fatalf("source %d pass %d has %d elements of %d", k[0], k[1], n, sizes[k[0]])
		}
	}
	// Complete passes differ in order (each pass reshuffles).
	a, b := passOrder[[2]uint64{2, 0}], passOrder[[2]uint64{2, 1}]
	if len(a) != 57 || len(b) != 57 || slices.Equal(a, b) {
		t.Fatalf("source 2's first two passes: %d and %d elements, equal order %v", len(a), len(b), slices.Equal(a, b))
	}
}
