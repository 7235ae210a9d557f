package pipeline

import (
	"context"
	"errors"
	"io"
	"testing"
)

type sliceProvider struct {
	splits []Split
	calls  int
}

func (p *sliceProvider) Next(ctx context.Context) (ProvidedSplit, error) {
	p.calls++
	if len(p.splits) == 0 {
		return ProvidedSplit{}, io.EOF
	}
	s := p.splits[0]
	p.splits = p.splits[1:]
	return ProvidedSplit{Split: s}, nil
}

func TestSplitProviderFeedsPipeline(t *testing.T) {
	spec := NewSpec(Source{Range: &RangeSource{Start: 0, Stop: 100, SplitSize: 10}})
	all, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	// The provider hands out every other split, in reverse.
	var mine []Split
	for i := len(all) - 1; i >= 0; i -= 2 {
		mine = append(mine, all[i])
	}
	p := &sliceProvider{splits: mine}
	ctx := context.Background()
	it, err := OpenWithOptions(ctx, spec, nil, Options{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []int64
	for {
		el, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tv, _ := el.Get("value")
		vs, err := tv.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, vs[0])
	}
	if len(got) != 50 || got[0] != 90 || got[9] != 99 || got[10] != 70 {
		t.Fatalf("got %d values starting %v", len(got), got[:min(len(got), 12)])
	}
	if p.calls != len(mine)+1 {
		t.Fatalf("provider asked %d times, want %d (once per split, once for the end)", p.calls, len(mine)+1)
	}
	if _, err := OpenWithOptions(ctx, spec, all, Options{Provider: &sliceProvider{}}); err == nil {
		t.Fatal("splits and a provider together were accepted")
	}
}
