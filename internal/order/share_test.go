package order

import (
	"slices"
	"testing"
)

// TestSharePartitionsLayout: for every N, the shares of consumers 0..N-1
// are disjoint, their windows together are the layout's, each a function
// of (layout, i, N), and interleaving them window by window (consumer
// w mod N's window w div N) gives the layout's window sequence.
func TestSharePartitionsLayout(t *testing.T) {
	for _, n := range []uint64{1000, 4097, 70000} {
		l, err := NewLayout(n, 64, 4, 7, 2)
		if err != nil {
			t.Fatal(err)
		}
		for N := uint64(1); N <= 7; N++ {
			var total uint64
			for i := range N {
				s, err := ShareOf(l, i, N)
				if i >= l.Windows() {
					if err == nil {
						t.Fatalf("n %d: consumer %d of %d with %d windows: no error", n, i, N, l.Windows())
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				total += s.Windows()
				for w := range s.Windows() {
					g := s.Global(w)
					if g%N != i || g/N != w {
						t.Fatalf("window %d of consumer %d of %d is layout window %d", w, i, N, g)
					}
					a, _ := s.Window(w)
					b, _ := l.Window(g)
					if !slices.Equal(a, b) || s.WindowLen(w) != uint64(len(b)) {
						t.Fatalf("consumer %d of %d window %d differs from layout window %d", i, N, w, g)
					}
				}
				if _, err := s.Window(s.Windows()); err == nil {
					t.Fatalf("window past the share: no error")
				}
			}
			if total != l.Windows() {
				t.Fatalf("n %d N %d: shares hold %d windows, layout %d", n, N, total, l.Windows())
			}
		}
	}
	l, _ := NewLayout(100, 10, 1, 1, 0)
	if _, err := ShareOf(l, 3, 3); err == nil {
		t.Fatal("consumer 3 of 3: no error")
	}
}
