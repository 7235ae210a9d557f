package diagnose

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

func TestAllocate(t *testing.T) {
	auto := pipeline.ParallelismAuto
	// One expensive map among cheap ops: it gets the cores the others
	// leave (1000 outputs/s of 1 ms each on 4 cores: x ≈ 3.99k/s, so
	// ⌈3.99·1/1.05⌉ = 4 workers).
	one := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cast", fn.Args{"tensor": "value", "dtype": "float32"}, auto).
		Map("cost", cpuCost, auto)
	// Two maps sharing the cores in proportion to their loads (3:1).
	two := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cost", cpuCost, auto).
		Map("cost", cpuCost, auto)
	// A sequential op after the map bounds the chain: more map workers
	// than what reaches its rate would be waste. The cost op's 2 ms per
	// element caps throughput at 500/s; the map's 1 ms needs 1 worker
	// (⌈500·0.001/1.05⌉).
	chained := pipeline.NewSpec(pipeline.FromRange(0, 1000, 1)).
		Map("cost", cpuCost, auto).
		Cost(2000, 0)
	for _, c := range []struct {
		name  string
		spec  *pipeline.Spec
		ops   []st
		cores float64
		want  map[int]int
	}{
		{"one bottleneck", one, []st{{1000, 0.001, 8}, {1000, 0.001, 4}, {1000, 1, 4}}, 4, map[int]int{0: 1, 1: 4}},
		{"two maps", two, []st{{1000, 0, 8}, {1000, 3, 8}, {1000, 1, 8}}, 8, map[int]int{0: 6, 1: 2}},
		{"sequential chain bounds", chained, []st{{1000, 0, 8}, {1000, 1, 8}, {1000, 2, 8}}, 8, map[int]int{0: 1}},
	} {
		got, err := Allocate(c.spec, runOf(c.spec, 0, c.ops...), c.cores)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := Allocate(one, runOf(one, 0, st{1000, 0, 8}, st{1000, 0, 4}, st{1000, 0, 4}), 4); err == nil ||
		!strings.Contains(err.Error(), "no op measured") {
		t.Errorf("no busy time: %v", err)
	}
	if _, err := Allocate(one, Run{}, 4); err == nil {
		t.Error("a run of no time allocated something")
	}
}

// A real pipeline whose map waits 2 ms per element (a stand-in for CPU
// work, so that 8 cores can be emulated on a small machine), with
// parallelism auto and the registered tuner: the tuner raises the map to
// most of the 8-core budget while it runs, and every element comes out
// once, in order.
func TestAutotuneConverges(t *testing.T) {
	spec := pipeline.NewSpec(pipeline.FromRange(0, 100000, 1)).
		Map("cost", fn.Args{"sleep_us": 2000}, pipeline.ParallelismAuto)
	ss, err := pipeline.Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	it, err := pipeline.OpenWithOptions(ctx, spec, ss, pipeline.Options{
		Cores: func() float64 { return 8 }, TuneInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var next int64
	peak := 0
	for {
		el, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tv, _ := el.Get("value")
		vs, _ := tv.Int64s()
		if len(vs) != 1 || vs[0] != next {
			t.Fatalf("element %d is %v", next, vs)
		}
		next++
		peak = max(peak, it.Stats().Ops[1].Parallelism)
		if peak >= 6 && next >= 600 {
			break // converged; the rest would only take time
		}
	}
	if peak < 6 {
		t.Errorf("the auto map reached %d workers of an 8-core budget after %d elements", peak, next)
	}
}
