package order

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestBatchesNumbering: committed in window order with random counts
// (empty windows included), Global and Locate are inverse over every
// numbered batch, nothing past them is numbered, and a numbering started
// from any window's anchor agrees with the full one from there on.
func TestBatchesNumbering(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for trial := range 200 {
		nw := 1 + r.Uint64N(40)
		counts := make([]uint64, nw)
		for w := range counts {
			if r.IntN(4) > 0 {
				counts[w] = r.Uint64N(6)
			}
		}
		full := NewBatches()
		for w, c := range counts {
			if err := full.Commit(uint64(w), c); err != nil {
				t.Fatal(err)
			}
		}
		var g uint64
		for w, c := range counts {
			for k := range c {
				got, ok := full.Global(uint64(w), k)
				if !ok || got != g {
					t.Fatalf("trial %d: Global(%d,%d) = %d %v, want %d", trial, w, k, got, ok, g)
				}
				lw, lk, ok := full.Locate(g)
				if !ok || lw != uint64(w) || lk != k {
					t.Fatalf("trial %d: Locate(%d) = %d,%d %v", trial, g, lw, lk, ok)
				}
				g++
			}
			if _, ok := full.Global(uint64(w), c); ok {
				t.Fatalf("trial %d: window %d numbered past its %d batches", trial, w, c)
			}
		}
		if _, _, ok := full.Locate(g); ok || full.Known() != g {
			t.Fatalf("trial %d: batch %d of %d located", trial, g, full.Known())
		}
		// From an anchor.
		a0 := r.Uint64N(nw)
		anchor, ok := full.Anchor(a0)
		if !ok {
			t.Fatalf("trial %d: no anchor for committed window %d", trial, a0)
		}
		part, err := NewBatchesFrom(anchor)
		if err != nil {
			t.Fatal(err)
		}
		for w := a0; w < nw; w++ {
			if err := part.Commit(w, counts[w]); err != nil {
				t.Fatal(err)
			}
		}
		for x := range g {
			fw, fk, _ := full.Locate(x)
			pw, pk, ok := part.Locate(x)
			if ok != (fw >= a0) || (ok && (pw != fw || pk != fk)) {
				t.Fatalf("trial %d anchor %+v: Locate(%d) = %d,%d %v; full %d,%d", trial, anchor, x, pw, pk, ok, fw, fk)
			}
		}
	}
}

func TestBatchesRefuses(t *testing.T) {
	b := NewBatches()
	if err := b.Commit(1, 3); !errors.Is(err, ErrBatches) {
		t.Errorf("commit of window 1 first: %v", err)
	}
	_ = b.Commit(0, 3)
	if err := b.Commit(0, 3); !errors.Is(err, ErrBatches) {
		t.Errorf("window 0 twice: %v", err)
	}
	if g, ok := b.Global(1, 7); !ok || g != 10 {
		t.Errorf("the next window's batch 7: %d %v (its predecessors are committed)", g, ok)
	}
	if _, ok := b.Global(2, 0); ok {
		t.Error("a window two ahead is numbered")
	}
	s, err := NewStaticBatches(4, 10)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := s.Global(2, 1); !ok || g != 9 {
		t.Errorf("static Global(2,1) = %d %v", g, ok)
	}
	if _, ok := s.Global(2, 2); ok {
		t.Error("static: batch 10 of 10 numbered")
	}
	if w, k, ok := s.Locate(9); !ok || w != 2 || k != 1 {
		t.Errorf("static Locate(9) = %d,%d %v", w, k, ok)
	}
	if err := s.Commit(0, 1); !errors.Is(err, ErrBatches) {
		t.Errorf("static commit: %v", err)
	}
	if _, err := NewBatchesFrom(Anchor{Window: MaxWindows}); !errors.Is(err, ErrBatches) {
		t.Errorf("anchor past MaxWindows: %v", err)
	}
}

func TestCutOwner(t *testing.T) {
	c := Cut{Start: 3, Gaps: NewGaps(Range{10, 14}, Range{20, 21}), N: 3}
	for rr := range uint64(100) {
		p, _ := c.Nth(rr%3, rr/3)
		i, k, ok := c.Owner(p)
		if !ok || i != rr%3 || k != rr/3 {
			t.Fatalf("Owner(Nth(%d,%d)=%d) = %d,%d %v", rr%3, rr/3, p, i, k, ok)
		}
	}
	for _, p := range []uint64{0, 2, 10, 13, 20} {
		if _, _, ok := c.Owner(p); ok {
			t.Errorf("position %d (before the start or skipped) has an owner", p)
		}
	}
}
