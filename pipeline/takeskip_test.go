package pipeline

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestFoldTakeSkip: a spec whose take and skip FoldTakeSkip applies to
// the source yields, run by one process, exactly what it yielded before
// (the same elements: positions [skip, skip+take) of the order), and has
// no take or skip left; specs it cannot fold say why.
func TestFoldTakeSkip(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *Spec
	}{
		{"take", rng(100, 10).Take(25)},
		{"skip", rng(100, 10).Skip(37)},
		{"skip then take", rng(100, 10).Skip(13).Take(40)},
		{"take then skip", rng(100, 10).Take(40).Skip(13)},
		{"take past the end", rng(100, 10).Skip(90).Take(40)},
		{"skip past the end", rng(100, 10).Skip(140)},
		{"take 0", rng(100, 10).Take(0)},
		{"two takes", rng(100, 7).Take(50).Skip(3).Take(20)},
		{"after maps, before a batch", rng(100, 10).Map("test_double", nil, 1).Cost(0, 1).Autocache().Take(33).Batch(8, false)},
		{"step", &Spec{Source: Source{Range: &RangeSource{Start: 5, Stop: 300, Step: 3, SplitSize: 9}}, Ops: []Op{{Skip: &SkipOp{Count: 11}}, {Take: &TakeOp{Count: 50}}}}},
		{"negative step", &Spec{Source: Source{Range: &RangeSource{Start: 50, Stop: -50, Step: -4, SplitSize: 4}}, Ops: []Op{{Skip: &SkipOp{Count: 3}}, {Take: &TakeOp{Count: 9}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := values(t, run(t, tc.spec))
			folded, ok, err := tc.spec.FoldTakeSkip()
			if err != nil || !ok {
				t.Fatalf("fold: %v %v", ok, err)
			}
			if folded.HasTakeSkip() {
				t.Fatalf("folded spec still takes or skips: %+v", folded.Ops)
			}
			if !tc.spec.HasTakeSkip() {
				t.Fatal("the original spec changed")
			}
			got := values(t, run(t, folded))
			if !slices.Equal(got, want) {
				t.Fatalf("folded yields %v, want %v", got, want)
			}
		})
	}
	ts := rng(100, 10).Cost(0, 1).Skip(3).Take(5).Cost(0, 1).Batch(2, false)
	for i, want := range []int{0, 0, 1, 2, 2, 2, 2} {
		if got := ts.TakeSkipBefore(i); got != want {
			t.Errorf("TakeSkipBefore(%d) = %d, want %d", i, got, want)
		}
	}
	if _, ok, err := rng(10, 2).Batch(2, false).FoldTakeSkip(); ok || err != nil {
		t.Fatalf("no take: folded %v, %v", ok, err)
	}
	for _, tc := range []struct {
		spec *Spec
		why  string
	}{
		{rng(100, 10).Batch(4, false).Take(3), "op 0 (batch) comes before a take or skip"},
		{rng(100, 10).Filter("test_even", nil).Skip(3), "op 0 (filter)"},
		{rng(100, 10).Take(5).Shuffle(10, 1).Skip(1), "op 1 (shuffle)"},
		{&Spec{Source: Source{Synthetic: &SyntheticSource{Kind: "records", Count: 10}}, Ops: []Op{{Take: &TakeOp{Count: 3}}}}, "only for a range source"},
	} {
		_, ok, err := tc.spec.FoldTakeSkip()
		if ok || !errors.Is(err, ErrTakeSkipPerWorker) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%+v: folded %v, %v; want %q", tc.spec.Ops, ok, err, tc.why)
		}
	}
}
