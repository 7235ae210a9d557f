package order

import (
	"fmt"
	"testing"
)

// cutBatches cuts ids into batches of b (the short last one dropped if
// drop).
func cutBatches(ids []uint64, b uint64, drop bool) [][]uint64 {
	var out [][]uint64
	for k := uint64(0); k < uint64(len(ids)); k += b {
		x := ids[k:min(k+b, uint64(len(ids)))]
		if drop && uint64(len(x)) < b {
			break
		}
		out = append(out, x)
	}
	return out
}

// TestShareIsGlobalBatchModN: for N = 1..7, batch sizes and
// drop_remainder, consumer i's share, window by window and cut into
// batches, is the epoch's global batches g with g mod N == i, in order
// (so together the shares are the epoch, nothing twice); GlobalBatches is
// the brute-force count; Reads cover the share's ids.
func TestShareIsGlobalBatchModN(t *testing.T) {
	for _, n := range []uint64{1000, 4097, 70001} {
		l, err := NewLayout(n, 64, 4, 7, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []uint64{1, 5, 8, 64, 300} {
			for _, drop := range []bool{false, true} {
				whole, _ := ShareOf(l, 0, 1, b, drop)
				var global [][]uint64
				for w := range l.Windows() {
					if got := whole.GlobalBatches(w); got != uint64(len(global)) {
						t.Fatalf("n %d b %d drop %v: GlobalBatches(%d) = %d, want %d", n, b, drop, w, got, len(global))
					}
					ids, _ := l.Window(w)
					global = append(global, cutBatches(ids, b, drop)...)
				}
				for N := uint64(1); N <= min(7, uint64(len(global))); N++ {
					for i := range N {
						s, err := ShareOf(l, i, N, b, drop)
						if err != nil {
							t.Fatal(err)
						}
						var mine [][]uint64
						for w := range s.Windows() {
							ids, err := s.Window(w)
							if err != nil {
								t.Fatal(err)
							}
							if N > 1 && uint64(len(ids)) != s.WindowLen(w) {
								t.Fatalf("window %d: %d ids, WindowLen %d", w, len(ids), s.WindowLen(w))
							}
							blocks := map[uint64]bool{}
							for _, r := range s.Reads(w) {
								blocks[r.Block] = true
							}
							for _, id := range ids {
								if !blocks[id/64] {
									t.Fatalf("window %d: id %d's block is not read", w, id)
								}
							}
							mine = append(mine, cutBatches(ids, b, drop)...)
						}
						var want [][]uint64
						for g := i; g < uint64(len(global)); g += N {
							want = append(want, global[g])
						}
						if fmt.Sprint(mine) != fmt.Sprint(want) {
							t.Fatalf("n %d b %d drop %v: consumer %d of %d: %d batches, not the global g mod N (%d)", n, b, drop, i, N, len(mine), len(want))
						}
					}
				}
			}
		}
	}
	l, _ := NewLayout(100, 10, 1, 1, 0)
	if _, err := ShareOf(l, 3, 3, 1, false); err == nil {
		t.Fatal("consumer 3 of 3: no error")
	}
	if _, err := ShareOf(l, 0, 11, 10, false); err == nil {
		t.Fatal("11 consumers of 10 batches: no error")
	}
}
