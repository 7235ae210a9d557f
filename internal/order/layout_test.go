package order

import (
	"errors"
	"slices"
	"testing"
)

type layoutCase struct{ n, block, window, seed, epoch uint64 }

func layoutCases() []layoutCase {
	var cs []layoutCase
	for _, n := range []uint64{1, 2, 7, 64, 100, 1000, 1001, 4099} {
		for _, block := range []uint64{1, 3, 16, 64, 5000} {
			for _, window := range []uint64{1, 2, 5, 64} {
				cs = append(cs, layoutCase{n, block, window, n*31 + block, block % 3})
			}
		}
	}
	return cs
}

// TestLayoutBijection: for every size, block and window (short block
// anywhere), At is a bijection of the positions onto the element ids,
// PositionOf inverts it, the windows tile the positions, and each window
// is exactly the elements of the blocks it reads.
func TestLayoutBijection(t *testing.T) {
	for _, c := range layoutCases() {
		l, err := NewLayout(c.n, c.block, c.window, c.seed, c.epoch)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		seen := make([]bool, c.n)
		var total uint64
		for w := range l.Windows() {
			if l.WindowStart(w) != total {
				t.Fatalf("%+v: window %d starts at %d, want %d", c, w, l.WindowStart(w), total)
			}
			ids, err := l.Window(w)
			if err != nil {
				t.Fatal(err)
			}
			var read []uint64
			reads := l.Reads(w)
			if uint64(len(reads)) > c.window {
				t.Fatalf("%+v: window %d reads %d blocks", c, w, len(reads))
			}
			for _, r := range reads {
				if r.First != r.Block*c.block || r.Len == 0 || r.Len > c.block {
					t.Fatalf("%+v: read %+v", c, r)
				}
				for k := range r.Len {
					read = append(read, r.First+k)
				}
			}
			got := slices.Clone(ids)
			slices.Sort(got)
			slices.Sort(read)
			if !slices.Equal(got, read) {
				t.Fatalf("%+v: window %d emits %v but reads %v", c, w, got, read)
			}
			for j, id := range ids {
				p := total + uint64(j)
				if seen[id] {
					t.Fatalf("%+v: element %d twice", c, id)
				}
				seen[id] = true
				if l.WindowOf(p) != w {
					t.Fatalf("%+v: WindowOf(%d) = %d, want %d", c, p, l.WindowOf(p), w)
				}
				if back, err := l.PositionOf(id); err != nil || back != p {
					t.Fatalf("%+v: PositionOf(%d) = %d, %v; want %d", c, id, back, err, p)
				}
			}
			total += uint64(len(ids))
		}
		if total != c.n {
			t.Fatalf("%+v: windows hold %d positions", c, total)
		}
		if _, err := l.At(c.n); !errors.Is(err, ErrLayout) {
			t.Errorf("At(n): %v", err)
		}
	}
}

// TestLayoutEpochs: the same (seed, epoch) gives the same order; another
// epoch or seed another order; the blocks each window reads change too.
func TestLayoutEpochs(t *testing.T) {
	order := func(seed, epoch uint64) []uint64 {
		l, err := NewLayout(10000, 100, 4, seed, epoch)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint64, l.Len())
		for p := range l.Len() {
			out[p], _ = l.At(p)
		}
		return out
	}
	a, b, c, d := order(1, 0), order(1, 0), order(1, 1), order(2, 0)
	if !slices.Equal(a, b) {
		t.Fatal("same seed and epoch, different order")
	}
	for _, other := range [][]uint64{c, d} {
		same := 0
		for i := range a {
			if a[i] == other[i] {
				same++
			}
		}
		if same > len(a)/50 {
			t.Errorf("another epoch or seed agrees on %d of %d positions", same, len(a))
		}
	}
	// Within a window, neighbours come from different blocks most of the
	// time (the window mixes its blocks): a block shuffle, not a block
	// concatenation.
	same := 0
	for i := 1; i < len(a); i++ {
		if a[i]/100 == a[i-1]/100 {
			same++
		}
	}
	if same > len(a)/2 {
		t.Errorf("%d of %d neighbours share a block: the window does not mix", same, len(a))
	}
}

func TestLayoutBounds(t *testing.T) {
	for _, c := range []layoutCase{{0, 1, 1, 0, 0}, {10, 0, 1, 0, 0}, {10, 1, 0, 0, 0}, {10, MaxBlock + 1, 1, 0, 0}, {10, 1 << 20, 1 << 13, 0, 0}, {MaxPermSize + 1, 1, 1, 0, 0}} {
		if _, err := NewLayout(c.n, c.block, c.window, 0, 0); !errors.Is(err, ErrLayout) {
			t.Errorf("%+v: %v, want ErrLayout", c, err)
		}
	}
	l, err := NewLayout(1<<40, 1<<16, 64, 9, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []uint64{0, 1, 1<<40 - 1, 123456789} {
		id, err := l.At(p)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := l.PositionOf(id); back != p {
			t.Fatalf("large layout: %d → %d → %d", p, id, back)
		}
	}
}

// TestWindowsOfBatches: the windows a run of global batches needs are
// those of its first and last positions, and nothing past the end.
func TestWindowsOfBatches(t *testing.T) {
	l, err := NewLayout(1000, 10, 3, 5, 0) // windows of 30 positions, one short window
	if err != nil {
		t.Fatal(err)
	}
	if first, last, ok := l.WindowsOfBatches(0, 1, ^uint64(0)); !ok || first != 0 || last != l.Windows()-1 {
		t.Errorf("one batch of every element: windows %d..%d %v", first, last, ok)
	}
	for g0 := range uint64(40) {
		for g1 := g0 + 1; g1 < g0+5; g1++ {
			first, last, ok := l.WindowsOfBatches(g0, g1, 32)
			if g0*32 >= 1000 {
				if ok {
					t.Fatalf("batches %d..%d past the end: ok", g0, g1)
				}
				continue
			}
			want0 := l.WindowOf(g0 * 32)
			want1 := l.WindowOf(min(g1*32, 1000) - 1)
			if !ok || first != want0 || last != want1 {
				t.Fatalf("batches %d..%d: %d..%d %v, want %d..%d", g0, g1, first, last, ok, want0, want1)
			}
		}
	}
}
