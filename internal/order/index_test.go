package order

import (
	"errors"
	"testing"
)

func TestIndex(t *testing.T) {
	counts := []uint64{3, 0, 5, 0, 0, 1, 7}
	x, err := NewIndex(counts)
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 16 || x.Splits() != 7 {
		t.Fatalf("len %d splits %d", x.Len(), x.Splits())
	}
	var id uint64
	for s, c := range counts {
		for e := range c {
			gs, ge, err := x.Locate(id)
			if err != nil || gs != s || ge != e {
				t.Fatalf("Locate(%d) = %d,%d,%v; want %d,%d", id, gs, ge, err, s, e)
			}
			if back, err := x.ID(s, e); err != nil || back != id {
				t.Fatalf("ID(%d,%d) = %d,%v", s, e, back, err)
			}
			id++
		}
	}
	if _, _, err := x.Locate(16); !errors.Is(err, ErrIndex) {
		t.Errorf("Locate past the end: %v", err)
	}
	for _, bad := range [][2]int{{1, 0}, {-1, 0}, {7, 0}, {0, 3}} {
		if _, err := x.ID(bad[0], uint64(bad[1])); !errors.Is(err, ErrIndex) {
			t.Errorf("ID%v: %v", bad, err)
		}
	}
	for _, bad := range [][]uint64{nil, {0, 0}, {MaxPermSize, 1}} {
		if _, err := NewIndex(bad); !errors.Is(err, ErrIndex) {
			t.Errorf("NewIndex(%v): %v", bad, err)
		}
	}
}
