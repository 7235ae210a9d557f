package bucketing

import (
	"math"
	"testing"
)

func TestStepTime(t *testing.T) {
	cases := []struct {
		tokens   []int64
		perToken float64
		want     float64
	}{
		{nil, 1, 0},
		{[]int64{}, 2, 0},
		{[]int64{100}, 0.5, 50},
		{[]int64{100, 400, 200, 300}, 0.01, 4},
		{[]int64{400, 400, 400, 400}, 0.01, 4}, // balanced: same step time, no idling
		{[]int64{-5, 10}, 1, 10},
		{[]int64{-5, -10}, 1, 0},
		{[]int64{100}, 0, 0},
		{[]int64{100}, -1, 0},
		{[]int64{100}, math.NaN(), 0},
		{[]int64{math.MaxInt64}, 1, float64(math.MaxInt64)},
	}
	for _, c := range cases {
		if got := StepTime(c.tokens, c.perToken); math.Abs(got-c.want) > 1e-9*max(1, c.want) {
			t.Errorf("StepTime(%v, %v) = %v, want %v", c.tokens, c.perToken, got, c.want)
		}
	}
}

func TestPaddedTokens(t *testing.T) {
	cases := []struct {
		lengths []int64
		want    int64
	}{
		{nil, 0},
		{[]int64{7}, 7},
		{[]int64{3, 9, 4}, 27},
		{[]int64{0, 0}, 0},
		{[]int64{-3, 2}, 4},
		{[]int64{math.MaxInt64, 1}, math.MaxInt64},
		{[]int64{1 << 62, 1 << 62, 1 << 62}, math.MaxInt64},
	}
	for _, c := range cases {
		if got := PaddedTokens(c.lengths); got != c.want {
			t.Errorf("PaddedTokens(%v) = %d, want %d", c.lengths, got, c.want)
		}
	}
}

func TestPaddingFraction(t *testing.T) {
	cases := []struct {
		real, padded int64
		want         float64
	}{
		{16, 27, 11.0 / 27}, {27, 27, 0}, {0, 27, 1}, {5, 0, 0}, {5, -1, 0}, {30, 27, 0}, {-1, 4, 1},
	}
	for _, c := range cases {
		if got := PaddingFraction(c.real, c.padded); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("PaddingFraction(%d, %d) = %v, want %v", c.real, c.padded, got, c.want)
		}
	}
}

// The model's point, on a toy: four consumers reading a heavy-tailed stream
// uncoordinated wait for the long batch every step; coordinated, the long
// batches meet in one step.
func TestStepTimeCoordinationToy(t *testing.T) {
	short, long := int64(10), int64(100)
	// Four steps, one long batch in each step's set of four when
	// uncoordinated; the same 16 batches grouped by bucket when coordinated.
	uncoordinated := [][]int64{{long, short, short, short}, {short, long, short, short}, {short, short, long, short}, {short, short, short, long}}
	coordinated := [][]int64{{long, long, long, long}, {short, short, short, short}, {short, short, short, short}, {short, short, short, short}}
	total := func(steps [][]int64) float64 {
		var s float64
		for _, st := range steps {
			s += StepTime(st, 1)
		}
		return s
	}
	if u, c := total(uncoordinated), total(coordinated); u != 400 || c != 130 {
		t.Errorf("modelled time uncoordinated %v (want 400), coordinated %v (want 130)", u, c)
	}
}
