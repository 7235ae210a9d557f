package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

func TestOpsAgainstReference(t *testing.T) {
	cases := []struct {
		name string
		spec *Spec
		want []int64
		// batches, when set, are the sizes of the emitted batches.
		batches []int64
	}{
		{"range", rng(5, 2), seq(0, 5), nil},
		{"empty input", rng(0, 2).Batch(3, false), nil, nil},
		{"map", rng(4, 3).Map("test_double", nil, 1), []int64{0, 2, 4, 6}, nil},
		{"map args", rng(3, 3).Map("test_add", fn.Args{"n": 10}, 1), []int64{10, 11, 12}, nil},
		{"parallel map keeps order", rng(200, 7).Map("test_jitter", nil, 4).Map("test_double", nil, 3), func() []int64 {
			var o []int64
			for i := int64(0); i < 200; i++ {
				o = append(o, 2*i)
			}
			return o
		}(), nil},
		{"filter", rng(7, 2).Filter("test_even", nil), []int64{0, 2, 4, 6}, nil},
		{"filter empty input", rng(0, 2).Filter("test_even", nil), nil, nil},
		{"batch remainder", rng(10, 4).Batch(3, false), seq(0, 10), []int64{3, 3, 3, 1}},
		{"batch drop remainder", rng(10, 4).Batch(3, true), seq(0, 9), []int64{3, 3, 3}},
		{"batch exact", rng(6, 4).Batch(3, true), seq(0, 6), []int64{3, 3}},
		{"batch larger than input", rng(2, 4).Batch(3, true), nil, nil},
		{"take", rng(10, 3).Take(4), seq(0, 4), nil},
		{"take 0", rng(10, 3).Take(0), nil, nil},
		{"take more than input", rng(3, 3).Take(10), seq(0, 3), nil},
		{"skip", rng(10, 3).Skip(7), seq(7, 10), nil},
		{"skip everything", rng(3, 3).Skip(5), nil, nil},
		{"repeat", rng(3, 2).Repeat(2), []int64{0, 1, 2, 0, 1, 2}, nil},
		{"repeat 0", rng(3, 2).Repeat(0), nil, nil},
		{"repeat of empty forever", rng(0, 2).RepeatForever(), nil, nil},
		{"repeat of filtered-out forever", rng(5, 2).Filter("test_even", nil).Skip(3).RepeatForever(), nil, nil},
		{"repeat forever then take", rng(3, 2).RepeatForever().Take(7), []int64{0, 1, 2, 0, 1, 2, 0}, nil},
		{"batch across repeat", rng(3, 2).Repeat(2).Batch(4, false), []int64{0, 1, 2, 0, 1, 2}, []int64{4, 2}},
		{"take inside repeat", rng(5, 2).Take(2).Repeat(3), []int64{0, 1, 0, 1, 0, 1}, nil},
		{"shuffle buffer 1 is identity", rng(20, 3).Shuffle(1, 9), seq(0, 20), nil},
		{"shuffle empty", rng(0, 3).Shuffle(10, 9), nil, nil},
		{"prefetch", rng(50, 7).Prefetch(3), seq(0, 50), nil},
		{"prefetch empty", rng(0, 7).Prefetch(3), nil, nil},
		{"cost cpu", rng(5, 7).Cost(10, 0), seq(0, 5), nil},
		{"cost sleep", rng(5, 7).Cost(0, 10), seq(0, 5), nil},
		{"prefetch take", rng(100, 7).Prefetch(4).Take(3), seq(0, 3), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			els := run(t, c.spec)
			if got := values(t, els); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if c.batches != nil {
				var sizes []int64
				for _, e := range els {
					v, _ := e.Get("value")
					sizes = append(sizes, v.Shape[0])
				}
				if !slices.Equal(sizes, c.batches) {
					t.Fatalf("batch sizes %v, want %v", sizes, c.batches)
				}
			}
		})
	}
}

func TestShuffleIsAPermutationAndSeeded(t *testing.T) {
	a := values(t, run(t, rng(100, 9).Shuffle(16, 1)))
	b := values(t, run(t, rng(100, 9).Shuffle(16, 1)))
	c := values(t, run(t, rng(100, 9).Shuffle(16, 2)))
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different order")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same order")
	}
	if slices.Equal(a, seq(0, 100)) {
		t.Fatal("not shuffled")
	}
	sorted := slices.Clone(a)
	slices.Sort(sorted)
	if !slices.Equal(sorted, seq(0, 100)) {
		t.Fatalf("not a permutation: %v", a)
	}
	// A window of 16: element i cannot appear before position i-15.
	for pos, v := range a {
		if v > int64(pos)+15 {
			t.Fatalf("element %d at position %d: outside the buffer window", v, pos)
		}
	}
	// Each repeat pass reshuffles.
	r := values(t, run(t, rng(30, 9).Shuffle(30, 1).Repeat(2)))
	if slices.Equal(r[:30], r[30:]) {
		t.Fatal("repeat passes shuffled identically")
	}
}

func TestParallelMapUnordered(t *testing.T) {
	f := false
	s := rng(300, 11).Then(Op{Map: &MapOp{Fn: "test_jitter", Parallelism: 4, Deterministic: &f}})
	got := values(t, run(t, s))
	slices.Sort(got)
	if !slices.Equal(got, seq(0, 300)) {
		t.Fatalf("unordered map lost or duplicated elements: %v", got)
	}
}

func TestMapErrorsInOrder(t *testing.T) {
	for _, par := range []int{1, 4} {
		els, err := runErr(rng(20, 3).Map("test_fail_at_7", nil, par))
		if err == nil || !strings.Contains(err.Error(), "seven") || !strings.Contains(err.Error(), "ops[0].map(test_fail_at_7)") {
			t.Fatalf("parallelism %d: err = %v", par, err)
		}
		if got := values(t, els); !slices.Equal(got, seq(0, 7)) {
			t.Fatalf("parallelism %d: before the error got %v", par, got)
		}
	}
}

// Cheap functions run in chunks; an error deep into the input must still
// come out in order, after exactly the elements before it.
func TestParallelMapChunkedError(t *testing.T) {
	els, err := runErr(rng(5000, 1000).Then(Op{Map: &MapOp{Fn: "test_fail_at", Args: fn.Args{"n": 3333}, Parallelism: 3}}))
	if err == nil || !strings.Contains(err.Error(), "failed at 3333") {
		t.Fatalf("err = %v", err)
	}
	if got := values(t, els); !slices.Equal(got, seq(0, 3333)) {
		t.Fatalf("got %d elements before the error, want 3333 in order", len(got))
	}
}

func int32s(t *testing.T, e tensor.Element, name string) ([]int32, []int64) {
	t.Helper()
	x, ok := e.Get(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	v, err := x.Int32s()
	if err != nil {
		t.Fatal(err)
	}
	return v, x.Shape
}

func TestPaddedBatch(t *testing.T) {
	// value 1..4 → tokens of length 1..4 (value % 5).
	els := run(t, &Spec{Source: Source{Range: &RangeSource{Start: 1, Stop: 5, SplitSize: 10}}, Ops: []Op{
		{Map: &MapOp{Fn: "test_vec"}},
		{PaddedBatch: &PaddedBatchOp{Size: 3, PadValue: -1}},
	}})
	if len(els) != 2 {
		t.Fatalf("%d batches, want 2", len(els))
	}
	toks, shape := int32s(t, els[0], "tokens")
	if !slices.Equal(shape, []int64{3, 3}) || !slices.Equal(toks, []int32{1, -1, -1, 2, 2, -1, 3, 3, 3}) {
		t.Fatalf("tokens %v %v", shape, toks)
	}
	lens, _ := int32s(t, els[0], "tokens_length")
	if !slices.Equal(lens, []int32{1, 2, 3}) {
		t.Fatalf("lengths %v", lens)
	}
	toks, shape = int32s(t, els[1], "tokens")
	if !slices.Equal(shape, []int64{1, 4}) || !slices.Equal(toks, []int32{4, 4, 4, 4}) {
		t.Fatalf("remainder tokens %v %v", shape, toks)
	}
}

func TestBucketBySequenceLength(t *testing.T) {
	// Lengths value%5 for values 0..29: 0,1,2,3,4,0,1,… Buckets: (-inf,1],
	// (1,3], (3,inf) with batch sizes 4, 3, 5.
	b := BucketOp{Tensor: "tokens", Boundaries: []int64{1, 3}, BatchSizes: []int64{4, 3, 5}, PadValue: 0}
	check := func(drop bool) []tensor.Element {
		b := b
		b.DropRemainder = drop
		els := run(t, rng(30, 7).Map("test_vec", nil, 1).BucketBySequenceLength(b))
		seen := map[int64]int{}
		for _, e := range els {
			lens, _ := int32s(t, e, "tokens_length")
			_, shape := int32s(t, e, "tokens")
			bucket := -1
			longest := int32(0)
			for _, l := range lens {
				bk := 0
				if l > 1 {
					bk = 1
				}
				if l > 3 {
					bk = 2
				}
				if bucket != -1 && bk != bucket {
					t.Fatalf("batch mixes buckets: lengths %v", lens)
				}
				bucket = bk
				longest = max(longest, l)
			}
			if shape[1] != int64(longest) {
				t.Fatalf("padded to %d, longest is %d", shape[1], longest)
			}
			if drop && int64(len(lens)) != b.BatchSizes[bucket] {
				t.Fatalf("partial batch %v with drop_remainder", lens)
			}
			for _, v := range values(t, []tensor.Element{e}) {
				seen[v]++
			}
		}
		if !drop && len(seen) != 30 {
			t.Fatalf("saw %d distinct elements, want 30", len(seen))
		}
		return els
	}
	// Bucket sizes: 12 elements of length 0-1 (12/4 = 3 full batches),
	// 12 of length 2-3 (4 full of 3), 6 of length 4 (one full of 5 and a
	// bucket that never fills again: 1 left at the end).
	if got := len(check(false)); got != 3+4+1+1 {
		t.Fatalf("%d batches, want 9", got)
	}
	if got := len(check(true)); got != 3+4+1 {
		t.Fatalf("%d batches with drop_remainder, want 8", got)
	}
}

func encodeAll(t *testing.T, els []tensor.Element) []byte {
	var buf bytes.Buffer
	for _, e := range els {
		for _, x := range e.Tensors {
			buf.WriteString(x.Name)
			binary.Write(&buf, binary.LittleEndian, x.Shape)
			buf.Write(x.Data)
			binary.Write(&buf, binary.LittleEndian, x.Offsets)
		}
	}
	return buf.Bytes()
}

func TestDeterminism(t *testing.T) {
	spec := func() *Spec {
		s := rng(500, 13).Shuffle(64, 3).Map("test_rand", nil, 4).Map("test_vec", nil, 2).Prefetch(2)
		s.Seed = 42
		return s.BucketBySequenceLength(BucketOp{Tensor: "tokens", Boundaries: []int64{2}, BatchSizes: []int64{8, 4}})
	}
	a := encodeAll(t, run(t, spec()))
	b := encodeAll(t, run(t, spec()))
	if !bytes.Equal(a, b) {
		t.Fatal("same spec, seed and splits gave different bytes")
	}
	s := spec()
	s.Seed = 43
	if bytes.Equal(a, encodeAll(t, run(t, s))) {
		t.Fatal("a different dataset seed gave the same random draws")
	}
}

func TestRandomFunctionsSeedPerElement(t *testing.T) {
	// The draw of an element depends on (seed, split, index), not on the
	// order elements arrive in: shuffling before the map permutes draws.
	s1 := rng(50, 10).Then(Op{Map: &MapOp{Fn: "test_rand", Seed: 77}})
	s2 := rng(50, 10).Shuffle(50, 5).Then(Op{Map: &MapOp{Fn: "test_rand", Seed: 77}})
	draws := map[int64]int64{}
	for _, e := range run(t, s1) {
		r, _ := e.Get("r")
		draws[value(e)], _ = r.Int64Value()
	}
	for _, e := range run(t, s2) {
		r, _ := e.Get("r")
		v, _ := r.Int64Value()
		if draws[value(e)] != v {
			t.Fatalf("element %d: draw changed with the order", value(e))
		}
	}
}

func TestOpenOnGivenSplits(t *testing.T) {
	spec := rng(10, 3)
	splits, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 4 {
		t.Fatalf("%d splits, want 4", len(splits))
	}
	ctx := context.Background()
	it, err := Open(ctx, spec.Repeat(2), []Split{splits[3], splits[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []int64
	for {
		e, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, value(e))
	}
	if want := []int64{9, 3, 4, 5, 9, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := it.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v, want EOF again", err)
	}
}

func TestCancelStopsEverything(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	spec := rng(1<<40, 1<<30).Map("test_double", nil, 4).Prefetch(8).Map("test_jitter", nil, 2).Prefetch(2)
	splits, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	it, err := Open(ctx, spec, splits)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for i := 0; ; i++ {
		_, err := it.Next(context.Background())
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			t.Fatalf("after cancel: %v", err)
		}
		if i > 100 {
			t.Fatal("still producing 100 elements after cancel")
		}
	}
	it.Close() // goleak in TestMain checks that every goroutine is gone
}

func TestCloseMidStream(t *testing.T) {
	ctx := context.Background()
	spec := rng(1<<40, 1<<30).Map("test_double", nil, 3).Shuffle(100, 1).Prefetch(4)
	splits, _ := Splits(spec)
	f := false
	spec.Then(Op{Map: &MapOp{Fn: "test_jitter", Parallelism: 3, Deterministic: &f}})
	it, err := Open(ctx, spec, splits[:2])
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(ctx); err == nil {
		t.Fatal("Next after Close succeeded")
	}
}

func TestNextRespectsCallerContext(t *testing.T) {
	spec := rng(10, 10).Cost(0, 10_000_000).Prefetch(1)
	splits, _ := Splits(spec)
	it, err := Open(context.Background(), spec, splits)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := it.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
}

// OpenList over a range's split list (computed per split, never built as a
// slice) reads what Open over Splits reads, repeats and random maps
// included.
func TestOpenListMatchesOpen(t *testing.T) {
	spec := rng(1000, 7).Map("test_double", nil, 1).Repeat(2)
	ctx := context.Background()
	all, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ListSplits(spec)
	if err != nil {
		t.Fatal(err)
	}
	if list.Len() != int64(len(all)) {
		t.Fatalf("ListSplits has %d splits, Splits %d", list.Len(), len(all))
	}
	want, err := Open(ctx, spec, all)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	got, err := OpenList(ctx, spec, list, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	w, g := drain(t, want, nil), drain(t, got, nil)
	if len(w) != 2000 || !slices.Equal(g, w) {
		t.Fatalf("OpenList read %d elements, Open %d (equal: %v)", len(g), len(w), slices.Equal(g, w))
	}
	if _, err := OpenList(ctx, spec, list, Options{Provider: nopProvider{}}); err == nil {
		t.Fatal("OpenList took both a split list and a provider")
	}
}

type nopProvider struct{}

func (nopProvider) Next(context.Context) (ProvidedSplit, error) { return ProvidedSplit{}, io.EOF }
