package formats

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRange(t *testing.T) {
	cases := []struct {
		name  string
		o     RangeOptions
		want  []int64
		nsplt int
	}{
		{"basic", RangeOptions{Start: 0, Stop: 5}, []int64{0, 1, 2, 3, 4}, 1},
		{"step", RangeOptions{Start: 1, Stop: 10, Step: 3, SplitSize: 2}, []int64{1, 4, 7}, 2},
		{"negative step", RangeOptions{Start: 5, Stop: 0, Step: -2, SplitSize: 1}, []int64{5, 3, 1}, 3},
		{"empty", RangeOptions{Start: 3, Stop: 3}, nil, 0},
		{"wrong direction", RangeOptions{Start: 0, Stop: 10, Step: -1}, nil, 0},
		{"split larger than range", RangeOptions{Start: 0, Stop: 3, SplitSize: 100}, []int64{0, 1, 2}, 1},
		{"uneven splits", RangeOptions{Start: 0, Stop: 7, SplitSize: 3}, []int64{0, 1, 2, 3, 4, 5, 6}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			splits, err := RangeSplits(c.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(splits) != c.nsplt {
				t.Fatalf("got %d splits %+v, want %d", len(splits), splits, c.nsplt)
			}
			var got []int64
			for i, s := range splits {
				if s.ID != int64(i) {
					t.Fatalf("split %d has ID %d", i, s.ID)
				}
				it, err := OpenRange(context.Background(), c.o, s)
				if err != nil {
					t.Fatal(err)
				}
				els, err := drain(t, it)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range els {
					got = append(got, int64Of(t, e, "value"))
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestRangeErrors(t *testing.T) {
	if _, err := RangeSplits(RangeOptions{Stop: 3, SplitSize: -1}); err == nil || !contains(err.Error(), "split_size") {
		t.Fatalf("want split_size error, got %v", err)
	}
	if _, err := OpenRange(context.Background(), RangeOptions{Stop: 3}, Split{Start: 2, End: 9}); err == nil {
		t.Fatal("want an error for a split outside the range")
	}
	ctx, cancel := context.WithCancel(context.Background())
	it, _ := OpenRange(ctx, RangeOptions{Stop: 3}, Split{Start: 0, End: 3})
	cancel()
	if _, err := it.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestRangeHuge(t *testing.T) {
	o := RangeOptions{Start: -1 << 62, Stop: 1 << 62, Step: 1 << 61}
	if n := o.count(); n != 4 {
		t.Fatalf("count = %d, want 4", n)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestRangeSplitsBounded(t *testing.T) {
	_, err := RangeSplits(RangeOptions{Start: 0, Stop: 1 << 40, SplitSize: 10})
	if err == nil || !strings.Contains(err.Error(), "split_size") {
		t.Fatalf("err = %v, want a limit error telling to raise split_size", err)
	}
}
