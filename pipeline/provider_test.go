package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
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

// slowProvider stands in for a worker whose leases take a while: each
// split comes after a fixed delay.
type slowProvider struct {
	sliceProvider
	delay time.Duration
}

func (p *slowProvider) Next(ctx context.Context) (ProvidedSplit, error) {
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ProvidedSplit{}, ctx.Err()
	}
	return p.sliceProvider.Next(ctx)
}

// Time the source waits for splits is its wait, not its work nor any op's:
// a diagnosis must not call a DYNAMIC worker's source the bound because
// leases took a while.
func TestSplitWaitIsNoOpsWork(t *testing.T) {
	for _, par := range []int{1, 4} { // 4: the map's input runs in a goroutine of its own
		t.Run(fmt.Sprintf("parallelism %d", par), func(t *testing.T) { splitWaitIsNoOpsWork(t, par) })
	}
}

func splitWaitIsNoOpsWork(t *testing.T, par int) {
	spec := NewSpec(Source{Range: &RangeSource{Start: 0, Stop: 2000, SplitSize: 100}}).
		Map("cast", map[string]any{"tensor": "value", "dtype": "float32"}, par).
		Batch(10, false)
	all, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	const delay = 20 * time.Millisecond
	p := &slowProvider{sliceProvider: sliceProvider{splits: all}, delay: delay}
	ctx := context.Background()
	it, err := OpenWithOptions(ctx, spec, nil, Options{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for {
		if _, err := it.Next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	st := it.Stats()
	waited := time.Duration(len(all)+1) * delay // one more call says EOF
	src := st.Ops[0]
	if src.WaitSeconds < waited.Seconds() {
		t.Errorf("source waited %.3f s for splits, want at least %.3f", src.WaitSeconds, waited.Seconds())
	}
	var work float64
	for _, o := range st.Ops {
		work += o.BusySeconds + o.StallSeconds
	}
	// The ops' own work on 2,000 small elements takes a few ms (about
	// 0.1 s under the race detector); the waits, 420 ms. Waits counted
	// as work add at least all of them (a sampled call counts 32 times
	// over).
	if work > waited.Seconds()/2 {
		t.Errorf("busy+stall over all ops %.3f s against %.3f s of split waits: waits counted as work\n%+v", work, waited.Seconds(), st.Ops)
	}
}
