package order

import (
	"encoding/binary"
	"testing"
)

// FuzzParams: parameters as a spec or a checkpoint from the network could
// give them (sizes, blocks, windows, consumers, progress, mixture counts)
// never panic: each constructor refuses them or gives a value whose
// lookups answer in range.
func FuzzParams(f *testing.F) {
	f.Add(uint64(1000), uint64(16), uint64(4), uint64(3), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint64(1), uint64(1), uint64(1), uint64(1), []byte{})
	f.Add(uint64(MaxPermSize), uint64(MaxBlock), uint64(1), uint64(MaxConsumers), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 1})
	f.Add(^uint64(0), uint64(0), ^uint64(0), uint64(0), []byte{0})
	f.Fuzz(fuzzParams)
}

func fuzzParams(t *testing.T, n, block, window, consumers uint64, extra []byte) {
	{
		u := func(i int) uint64 {
			if len(extra) < 8*(i+1) {
				return uint64(i) * 7
			}
			return binary.LittleEndian.Uint64(extra[8*i:])
		}
		if l, err := NewLayout(n, block, window, u(0), u(1)); err == nil {
			for _, p := range []uint64{0, n - 1, u(2) % n} {
				id, err := l.At(p)
				if err != nil || id >= n {
					t.Fatalf("At(%d) = %d, %v of %d", p, id, err, n)
				}
				if back, err := l.PositionOf(id); err != nil || back != p {
					t.Fatalf("PositionOf(At(%d)) = %d, %v", p, back, err)
				}
				if w := l.WindowOf(p); w >= l.Windows() {
					t.Fatalf("WindowOf(%d) = %d of %d", p, w, l.Windows())
				}
			}
			l.WindowsOfBatches(u(3), u(4), u(5))
		}
		// A cut and a merge of arbitrary progress.
		c := Cut{Start: u(6) % MaxPermSize, Gaps: NewGaps(Range{u(7) % 1000, u(8) % 1000}), N: consumers}
		if _, err := c.Nth(u(9)%max(consumers, 1), u(10)); err == nil {
			// answered: fine
		}
		c.Owner(u(11))
		if consumers > 0 && consumers <= 64 {
			ps := make([]ConsumerProgress, consumers)
			for i := range ps {
				ps[i] = ConsumerProgress{Index: uint64(i), Next: u(12+i%4) % 1000}
			}
			if m, err := Merge(c, ps, u(16)%100, MaxAhead); err == nil {
				if m.N == 0 || len(m.Gaps.Ranges()) > MaxAhead+1 {
					t.Fatalf("merge gave %+v", m)
				}
			}
		}
		// A mixture of counts from the bytes.
		var counts []uint64
		var sum uint64
		for i, b := range extra {
			if i >= 16 {
				break
			}
			counts = append(counts, uint64(b))
			sum += uint64(b)
		}
		if m, err := NewMixture(sum, u(0), []Stage{{Counts: counts}}); err == nil {
			src, _ := m.At(u(1))
			if src < 0 || src >= len(counts) || counts[src] == 0 {
				t.Fatalf("mixture %v chose source %d", counts, src)
			}
		}
		if len(extra) > 0 {
			w := make([]float64, 0, len(extra))
			for _, b := range extra {
				w = append(w, float64(b)/3)
			}
			if c, err := Apportion(window%MaxMixWindow+1, w); err == nil {
				var s uint64
				for _, x := range c {
					s += x
				}
				if s != window%MaxMixWindow+1 {
					t.Fatalf("Apportion(%d, %v) = %v", window%MaxMixWindow+1, w, c)
				}
			}
		}
	}
}
