package pipeline

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/ranges"
)

func TestParseParallelismAuto(t *testing.T) {
	y, err := ParseYAML([]byte("source:\n  range: {stop: 10}\nops:\n  - map: {fn: test_double, parallelism: auto}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := y.Ops[0].Map.Parallelism; p != ParallelismAuto {
		t.Errorf("YAML parallelism: auto gave %d", p)
	}
	j, err := ParseJSON([]byte(`{"source": {"range": {"stop": 10}}, "autotune": true, "ops": [{"map": {"fn": "test_double", "parallelism": "auto"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.Ops[0].Map.Parallelism != ParallelismAuto || !j.Autotune {
		t.Errorf("JSON: parallelism %d, autotune %v", j.Ops[0].Map.Parallelism, j.Autotune)
	}
	fixed := NewSpec(Source{Range: &RangeSource{Stop: 10}}).Map("test_double", nil, 1)
	auto := NewSpec(Source{Range: &RangeSource{Stop: 10}}).Map("test_double", nil, ParallelismAuto)
	fa, _ := auto.Fingerprint()
	ff, _ := fixed.Fingerprint()
	if fa == ff {
		t.Error("parallelism auto and 1 have the same fingerprint")
	}
	fy, _ := y.Fingerprint()
	if fy != fa {
		t.Error("the YAML and the builder's auto map differ")
	}
	// autotune is part of the dataset, and survives the canonical form
	// workers get from the cluster.
	tunedAll := *fixed
	tunedAll.Autotune = true
	ft, _ := tunedAll.Fingerprint()
	if ft == ff {
		t.Error("autotune: true did not change the fingerprint")
	}
	canon, err := tunedAll.CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCanonical(canon)
	if err != nil || !back.Autotune || back.Ops[0].Map.Parallelism != 1 {
		t.Errorf("canonical round trip: %+v, %v", back, err)
	}
	canon, _ = auto.CanonicalEncoding()
	if back, err := DecodeCanonical(canon); err != nil || back.Ops[0].Map.Parallelism != ParallelismAuto {
		t.Errorf("canonical round trip of an auto map: %v", err)
	}
	for _, bad := range []struct{ text, want string }{
		{"source:\n  range: {stop: 10}\nops:\n  - map: {fn: test_double, parallelism: automatic}\n", "ops[0].map.parallelism"},
		{"source:\n  range: {stop: 10}\nops:\n  - map: {fn: test_double, parallelism: -2}\n", "or auto"},
		{"source:\n  range: {stop: 10}\nops:\n  - shuffle: {buffer: auto}\n", "ops[0].shuffle.buffer"},
		{"source:\n  range: {stop: 10}\nautotune: maybe\n", "autotune"},
	} {
		if _, err := ParseYAML([]byte(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error naming %q", bad.text, err, bad.want)
		}
	}
}

// A gate lets limit holders through, parks the rest, lets them through
// when the limit rises, and wakes them when their context ends.
func TestGate(t *testing.T) {
	g := newGate(1)
	ctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, g.wake)
	defer stop()
	if !g.acquire(ctx) {
		t.Fatal("first acquire failed")
	}
	got := make(chan bool, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got <- g.acquire(ctx)
		}()
	}
	select {
	case <-got:
		t.Fatal("an acquire passed a full gate")
	case <-time.After(20 * time.Millisecond):
	}
	g.set(2) // one more may pass
	if ok := <-got; !ok {
		t.Fatal("acquire after the limit rose failed")
	}
	cancel() // the last one is still parked: it wakes, without a slot
	if ok := <-got; ok {
		t.Fatal("acquire after ctx ended succeeded")
	}
	wg.Wait()
}

// drain reads every element's "value" in order.
func drain(t *testing.T, it Iterator, onEach func()) []int64 {
	t.Helper()
	var out []int64
	for {
		el, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		tv, _ := el.Get("value")
		vs, err := tv.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vs...)
		if onEach != nil {
			onEach()
		}
	}
}

// The tuner's answer becomes the map's parallelism while the pipeline
// runs, in input order (deterministic by default), nothing lost.
func TestAutotuneAppliesTuner(t *testing.T) {
	spec := rng(400, 50).Map("cost", map[string]any{"sleep_us": 500}, ParallelismAuto)
	var calls sync.WaitGroup
	calls.Add(1)
	var once sync.Once
	tuner := func(w Stats, cores float64) (map[int]int, error) {
		if cores != 6 || len(w.Ops) != 2 || w.Ops[1].ElementsOut == 0 {
			t.Errorf("tuner called with cores %v, window %+v", cores, w.Ops)
		}
		once.Do(calls.Done)
		return map[int]int{0: 4}, nil
	}
	it, err := OpenWithOptions(context.Background(), spec, mustSplits(t, spec),
		Options{Tuner: tuner, Cores: func() float64 { return 6 }, TuneInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if p := it.Stats().Ops[1].Parallelism; p != 1 {
		t.Errorf("an auto map starts at %d workers, want 1", p)
	}
	seen := 0
	got := drain(t, it, func() {
		if p := it.Stats().Ops[1].Parallelism; p == 4 {
			seen++
		}
	})
	if want := seq(0, 400); !slices.Equal(got, want) {
		t.Fatalf("got %d values, not 0..399 in order", len(got))
	}
	calls.Wait()
	if seen == 0 || it.Stats().Ops[1].Parallelism != 4 {
		t.Errorf("parallelism 4 seen on %d elements, %d at the end", seen, it.Stats().Ops[1].Parallelism)
	}
}

// Without a tuner, an auto map runs at the core budget.
func TestAutoWithoutTuner(t *testing.T) {
	spec := rng(100, 50).Map("test_double", nil, ParallelismAuto)
	it, err := OpenWithOptions(context.Background(), spec, mustSplits(t, spec), Options{Cores: func() float64 { return 2.5 }})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	got := drain(t, it, nil)
	if len(got) != 100 || got[99] != 198 {
		t.Fatalf("got %d values ending %v", len(got), got[len(got)-1:])
	}
	if p := it.Stats().Ops[1].Parallelism; p != 3 {
		t.Errorf("parallelism %d, want the budget's 3 cores", p)
	}
}

func mustSplits(t *testing.T, spec *Spec) []Split {
	t.Helper()
	ss, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// With autotune: true (tuned maps and the prefetch it adds at the end),
// provenance tracking still accounts for every element exactly once and
// completes every split: exactly-once workers run such specs.
func TestAutotuneKeepsProvenance(t *testing.T) {
	spec := NewSpec(rangeSource(300, 30)).Map("test_double", nil, ParallelismAuto).Batch(7, false)
	spec.Autotune = true
	all := mustSplits(t, spec)
	it, err := OpenWithOptions(context.Background(), spec, all, Options{Track: true, Cores: func() float64 { return 4 }, TuneInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	want := map[splitKey]ranges.Set{}
	for _, s := range all {
		want[splitKey{0, s.ID}] = ranges.Span(0, s.End-s.Start)
	}
	checkTracked(t, it, want, nil)
}
