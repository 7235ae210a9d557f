package pairwise

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestGenerateCovers: on products with and without constraints, every
// pair an allowed row has is in a returned row, every returned row is
// allowed, and the rows are far fewer than the product.
func TestGenerateCovers(t *testing.T) {
	noSame01 := func(r []int) bool { return r[0] != r[1] }
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name    string
		sizes   []int
		valid   func([]int) bool
		maxRows int
	}{
		{"3^4", []int{3, 3, 3, 3}, nil, 11},                    // optimal is 9
		{"2^10", []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, nil, 10}, // optimal is 6
		{"mixed", []int{4, 3, 4, 4, 2, 2, 2, 3, 2, 2}, nil, 30},
		{"constrained", []int{3, 3, 2, 2}, noSame01, 12},
		{"one dimension", []int{5}, nil, 1},
		{"random constraint", []int{3, 4, 2, 3, 2}, func(r []int) bool { return (r[0]+r[1]*r[3]+r[4])%4 != 1 }, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := Generate(tc.sizes, tc.valid)
			if err != nil {
				t.Fatal(err)
			}
			if u := Uncovered(tc.sizes, tc.valid, rows); len(u) > 0 {
				t.Fatalf("pairs not covered: %v", u)
			}
			for _, r := range rows {
				if tc.valid != nil && !tc.valid(r) {
					t.Fatalf("row %v is not allowed", r)
				}
			}
			if len(rows) > tc.maxRows {
				t.Fatalf("%d rows, want at most %d", len(rows), tc.maxRows)
			}
			again, _ := Generate(tc.sizes, tc.valid)
			if !reflect.DeepEqual(rows, again) {
				t.Fatal("not deterministic")
			}
		})
	}
	// Random constraints: coverage holds whatever is forbidden.
	for k := range 20 {
		sizes := []int{1 + rng.IntN(4), 1 + rng.IntN(4), 1 + rng.IntN(3), 1 + rng.IntN(3), 1 + rng.IntN(2)}
		bad := map[[2]int]bool{{rng.IntN(4), rng.IntN(4)}: true}
		valid := func(r []int) bool { return !bad[[2]int{r[0], r[1]}] }
		rows, err := Generate(sizes, valid)
		if err != nil {
			t.Fatal(err)
		}
		if u := Uncovered(sizes, valid, rows); len(u) > 0 {
			t.Fatalf("case %d %v: pairs not covered: %v", k, sizes, u)
		}
	}
}

// TestUncoveredSeesAGap: Uncovered reports a pair that the rows miss (so
// TestGenerateCovers could fail).
func TestUncoveredSeesAGap(t *testing.T) {
	rows := [][]int{{0, 0}, {1, 1}, {0, 1}}
	if u := Uncovered([]int{2, 2}, nil, rows); len(u) != 1 || u[0] != "0=1 1=0" {
		t.Fatalf("%v", u)
	}
}

// TestGenerateErrors: a dimension without values, or a product too large
// to enumerate, is an error.
func TestGenerateErrors(t *testing.T) {
	if _, err := Generate([]int{2, 0}, nil); err == nil {
		t.Fatal("a dimension of 0 values")
	}
	if _, err := Generate([]int{1 << 12, 1 << 12}, nil); err == nil {
		t.Fatal("a product of 2^24")
	}
	rows, err := Generate([]int{2, 2}, func([]int) bool { return false })
	if err != nil || len(rows) != 0 {
		t.Fatalf("nothing allowed: %v, %v", rows, err)
	}
}
