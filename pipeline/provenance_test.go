package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/ranges"
)

// planProvider hands out a fixed list of ProvidedSplits. Its Next may be
// called from a prefetch or parallel map goroutine.
type planProvider struct {
	mu   sync.Mutex
	list []ProvidedSplit
}

func (p *planProvider) Next(ctx context.Context) (ProvidedSplit, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.list) == 0 {
		return ProvidedSplit{}, io.EOF
	}
	s := p.list[0]
	p.list = p.list[1:]
	return s, nil
}

type splitKey struct{ epoch, split int64 }

// randomExclude draws an Exclude set over [0, n): single indices, spans,
// sometimes nothing and sometimes everything.
func randomExclude(r *rand.Rand, n int64) ranges.Set {
	switch r.IntN(6) {
	case 0:
		return nil
	case 1:
		return ranges.Span(0, n)
	}
	var ex ranges.Set
	for i := int64(0); i < n; i++ {
		switch r.IntN(10) {
		case 0, 1:
			ex.Add(i)
		case 2:
			ex.AddSpan(i, i+r.Int64N(4)+1)
		}
	}
	return ex.Intersect(ranges.Span(0, n))
}

// overlappingPlan reads every split in epoch 1 and, one split behind, every
// other split again in epoch 2, each with a random Exclude set; so splits
// of the same id and two epochs are in flight together.
func overlappingPlan(all []Split, seed uint64) []ProvidedSplit {
	r := rand.New(rand.NewPCG(seed, 1))
	var list []ProvidedSplit
	for i, s := range all {
		list = append(list, ProvidedSplit{Split: s, Epoch: 1, Exclude: randomExclude(r, s.End-s.Start)})
		if i%2 == 1 {
			p := all[i-1]
			list = append(list, ProvidedSplit{Split: p, Epoch: 2, Exclude: randomExclude(r, p.End-p.Start)})
		}
	}
	return list
}

// trackedRun is what checkTracked observed.
type trackedRun struct {
	outputs  int
	dropped  int64
	emitted  int64
	complete map[splitKey]CompletedSplit
}

// checkTracked runs it to the end and checks the provenance contract
// against want (the indices each (epoch, split) reads): outputs' provenance
// is sorted, valid, disjoint and within want; each split completes exactly
// once, after its last output, with Emitted = the union of its provenance
// and Read = Emitted + Dropped = |want|; every wanted split completes.
// check, if set, sees each output and its provenance.
func checkTracked(t *testing.T, it Iterator, want map[splitKey]ranges.Set, check func(Element, []SplitElements)) trackedRun {
	t.Helper()
	ctx := context.Background()
	tr, ok := it.(Tracker)
	if !ok {
		t.Fatal("a tracked iterator does not implement Tracker")
	}
	seen := map[splitKey]ranges.Set{}
	run := trackedRun{complete: map[splitKey]CompletedSplit{}}
	completed := func() {
		for _, c := range tr.Completed() {
			k := splitKey{c.Epoch, c.Split}
			if _, dup := run.complete[k]; dup {
				t.Fatalf("split %v completed twice", k)
			}
			w, ok := want[k]
			if !ok {
				t.Fatalf("split %v completed but was never provided", k)
			}
			if err := c.Emitted.Validate(); err != nil {
				t.Fatalf("split %v: Emitted: %v", k, err)
			}
			if !slices.Equal(c.Emitted, seen[k]) && !(c.Emitted.Empty() && seen[k].Empty()) {
				t.Fatalf("split %v: Emitted %v, outputs carried %v", k, c.Emitted, seen[k])
			}
			if c.Read != w.Len() || c.Emitted.Len()+c.Dropped != c.Read {
				t.Fatalf("split %v: read %d (want %d), emitted %d, dropped %d", k, c.Read, w.Len(), c.Emitted.Len(), c.Dropped)
			}
			run.complete[k] = c
			run.dropped += c.Dropped
		}
	}
	for {
		el, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		prov := tr.LastProvenance()
		if len(prov) == 0 {
			t.Fatal("an output without provenance")
		}
		for i, g := range prov {
			k := splitKey{g.Epoch, g.Split}
			if i > 0 && (g.Epoch < prov[i-1].Epoch || g.Epoch == prov[i-1].Epoch && g.Split <= prov[i-1].Split) {
				t.Fatalf("provenance not sorted: %v", prov)
			}
			if err := g.Indices.Validate(); err != nil || g.Indices.Empty() {
				t.Fatalf("split %v: indices %v: %v", k, g.Indices, err)
			}
			if _, done := run.complete[k]; done {
				t.Fatalf("split %v: element %v returned after the split completed", k, g.Indices)
			}
			if extra := g.Indices.Minus(want[k]); !extra.Empty() {
				t.Fatalf("split %v: indices %v returned, not read (excluded or out of range)", k, extra)
			}
			if again := g.Indices.Intersect(seen[k]); !again.Empty() {
				t.Fatalf("split %v: indices %v returned twice", k, again)
			}
			s := seen[k]
			s.AddAll(g.Indices)
			seen[k] = s
			run.emitted += g.Indices.Len()
		}
		if check != nil {
			check(el, prov)
		}
		run.outputs++
		completed()
	}
	completed()
	for k := range want {
		if _, ok := run.complete[k]; !ok {
			t.Fatalf("split %v never completed (%d splits did)", k, len(run.complete))
		}
	}
	return run
}

// splitLen is the number of elements the source yields for s.
func splitLen(t *testing.T, src Source, s Split) int64 {
	t.Helper()
	ctx := context.Background()
	it, err := Open(ctx, NewSpec(src), []Split{s})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := int64(0)
	for {
		if _, err := it.Next(ctx); errors.Is(err, io.EOF) {
			return n
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
}

// rangeValuesMatch checks that a range-sourced output (start 0, step 1)
// holds exactly the values its provenance names: split.Start + index.
func rangeValuesMatch(t *testing.T, byID map[int64]Split) func(Element, []SplitElements) {
	return func(el Element, prov []SplitElements) {
		t.Helper()
		tv, ok := el.Get("value")
		if !ok {
			t.Fatal("no value tensor")
		}
		got, err := tv.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for _, g := range prov {
			g.Indices.Each(func(i int64) bool {
				want = append(want, byID[g.Split].Start+i)
				return true
			})
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("output holds values %v, provenance says %v", got, want)
		}
	}
}

func rangeSource(n, splitSize int64) Source {
	return Source{Range: &RangeSource{Start: 0, Stop: n, Step: 1, SplitSize: splitSize}}
}

func mapOp(name string, args fn.Args, parallelism int, deterministic bool) Op {
	return Op{Map: &MapOp{Fn: name, Args: args, Parallelism: parallelism, Deterministic: &deterministic}}
}

func TestTrackProvenanceWithProvider(t *testing.T) {
	text := Source{Synthetic: &SyntheticSource{Kind: "text", Count: 600, Seed: 3, SplitSize: 40, MaxWords: 100}}
	bucket := BucketOp{Tensor: "tokens", Boundaries: []int64{8, 16, 32, 64}, BatchSizes: []int64{16, 12, 8, 4, 2}}
	bucketDrop := bucket
	bucketDrop.DropRemainder = true
	cases := []struct {
		name      string
		spec      *Spec
		rangeVals bool // outputs hold range values (check them against provenance)
		drops     bool // some elements must be dropped
	}{
		{"range/batch", NewSpec(rangeSource(997, 10)).Batch(16, false), true, false},
		{"range/shuffle/batch", NewSpec(rangeSource(997, 10)).Shuffle(37, 5).Batch(10, false), true, false},
		{"range/filter/batch_drop", NewSpec(rangeSource(997, 10)).Map("test_vec", nil, 1).
			Filter("length_between", fn.Args{"tensor": "tokens", "min": 2, "max": 2}).Batch(7, true), true, true},
		{"parallel_map_nondeterministic/padded_batch", NewSpec(rangeSource(997, 10)).
			Then(mapOp("test_vec", nil, 4, false)).Then(mapOp("test_jitter", nil, 3, false)).PaddedBatch(5, -1), true, false},
		{"padded_batch_drop/prefetch", NewSpec(rangeSource(997, 10)).Then(mapOp("test_vec", nil, 1, true)).
			Then(Op{PaddedBatch: &PaddedBatchOp{Size: 6, DropRemainder: true}}).Prefetch(3), true, true},
		{"skip/prefetch/take_all/batch", NewSpec(rangeSource(997, 10)).Skip(23).Prefetch(2).Take(5000).Batch(8, false), true, true},
		{"batch_drop/shuffle/batch", NewSpec(rangeSource(997, 10)).Batch(3, true).Shuffle(5, 1).Batch(4, false), true, true},
		{"text/bucket_by_sequence_length", NewSpec(text).Map("tokenize_whitespace", nil, 1).Shuffle(64, 2).BucketBySequenceLength(bucket), false, false},
		{"text/bucket_by_sequence_length_drop", NewSpec(text).Map("tokenize_whitespace", nil, 1).BucketBySequenceLength(bucketDrop), false, true},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all, err := Splits(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[int64]Split{}
			for _, s := range all {
				byID[s.ID] = s
			}
			plan := overlappingPlan(all, uint64(ci))
			want := map[splitKey]ranges.Set{}
			excluded := false
			for _, ps := range plan {
				n := splitLen(t, tc.spec.Source, ps.Split)
				want[splitKey{ps.Epoch, ps.Split.ID}] = ranges.Span(0, n).Minus(ps.Exclude)
				excluded = excluded || !ps.Exclude.Empty()
			}
			if !excluded {
				t.Fatal("the plan excludes nothing")
			}
			ctx := context.Background()
			it, err := OpenWithOptions(ctx, tc.spec, nil, Options{Provider: &planProvider{list: plan}, Track: true})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			var check func(Element, []SplitElements)
			if tc.rangeVals {
				check = rangeValuesMatch(t, byID)
			}
			run := checkTracked(t, it, want, check)
			if tc.drops != (run.dropped > 0) {
				t.Fatalf("dropped %d elements; drops expected: %v", run.dropped, tc.drops)
			}
			if run.outputs == 0 || run.emitted == 0 {
				t.Fatal("no output")
			}
		})
	}
}

// Over a fixed split list (Open), the tracking epoch is the repeat pass:
// the same splits read twice are two keys.
func TestTrackProvenanceFixedSplits(t *testing.T) {
	spec := NewSpec(rangeSource(220, 20)).Repeat(2).Shuffle(50, 3).Batch(9, false)
	all, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Read a subset, one split twice.
	mine := []Split{all[3], all[0], all[10], all[3]}
	ctx := context.Background()
	it, err := OpenWithOptions(ctx, spec, mine, Options{Track: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	// The split listed twice is two readings of one key: check the others
	// key by key and that one by its totals.
	want := map[splitKey]ranges.Set{}
	for pass := int64(0); pass < 2; pass++ {
		for _, s := range mine[1:3] {
			want[splitKey{pass, s.ID}] = ranges.Span(0, s.End-s.Start)
		}
	}
	tr := it.(Tracker)
	counts := map[splitKey]int64{}
	completions := map[splitKey]int{}
	for {
		_, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range tr.LastProvenance() {
			counts[splitKey{g.Epoch, g.Split}] += g.Indices.Len()
		}
		for _, c := range tr.Completed() {
			completions[splitKey{c.Epoch, c.Split}]++
			if c.Read != c.Emitted.Len() || c.Dropped != 0 || c.Read != 20 {
				t.Fatalf("%+v", c)
			}
		}
	}
	for _, c := range tr.Completed() {
		completions[splitKey{c.Epoch, c.Split}]++
	}
	for pass := int64(0); pass < 2; pass++ {
		for i, s := range mine {
			k := splitKey{pass, s.ID}
			n, times := int64(20), 1
			if s.ID == all[3].ID {
				n, times = 40, 2
			}
			if counts[k] != n || completions[k] != times {
				t.Fatalf("split %d (list %d) pass %d: %d elements returned, completed %d times", s.ID, i, pass, counts[k], completions[k])
			}
		}
	}
	if len(completions) != 6 {
		t.Fatalf("completions %v", completions)
	}
	// Without the duplicate, the full contract holds.
	it2, err := OpenWithOptions(ctx, spec, mine[:3], Options{Track: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Close()
	want[splitKey{0, all[3].ID}] = ranges.Span(0, 20)
	want[splitKey{1, all[3].ID}] = ranges.Span(0, 20)
	checkTracked(t, it2, want, nil)
}

// A pipeline that ends early (take) completes only the splits whose
// elements have all left, and one without Track is no Tracker.
func TestTrackTakeStopsEarly(t *testing.T) {
	spec := NewSpec(rangeSource(100, 10)).Batch(4, false).Take(6)
	ctx := context.Background()
	all, _ := Splits(spec)
	it, err := OpenWithOptions(ctx, spec, all, Options{Track: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var done []CompletedSplit
	for {
		if _, err := it.Next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		done = append(done, it.(Tracker).Completed()...)
	}
	done = append(done, it.(Tracker).Completed()...)
	// 24 elements returned: splits 0 and 1 entirely (the source moved on
	// from split 1 when it read element 20); split 2 was not read to its
	// end, so it never completes.
	if len(done) != 2 || done[0].Split != all[0].ID || done[1].Split != all[1].ID ||
		!slices.Equal(done[1].Emitted, ranges.Span(0, 10)) {
		t.Fatalf("completed %+v", done)
	}
	plain, err := Open(ctx, spec, all)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.(Tracker); ok {
		t.Fatal("an untracked iterator implements Tracker")
	}
}

func TestProviderExcludeInvalid(t *testing.T) {
	spec := NewSpec(rangeSource(100, 10))
	all, _ := Splits(spec)
	ctx := context.Background()
	it, err := OpenWithOptions(ctx, spec, nil, Options{Provider: &planProvider{list: []ProvidedSplit{
		{Split: all[0], Exclude: ranges.Set{5, 3}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if _, err := it.Next(ctx); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("an invalid Exclude set was accepted: %v", err)
	}
}

// A split re-run with an Exclude set yields, for every index it does not
// exclude, exactly the bytes the first run yielded, even through random
// maps run in parallel: random functions are seeded per (seed, epoch,
// split, index), never by position in the stream. Another epoch draws
// differently.
func TestExcludeRerunDeterministic(t *testing.T) {
	src := Source{Synthetic: &SyntheticSource{Kind: "image", Count: 150, Seed: 9, SplitSize: 20, Width: 12, Height: 10, Channels: 3}}
	spec := NewSpec(src).
		Then(mapOp("random_flip", fn.Args{"vertical": true}, 3, false)).
		Map("random_crop", fn.Args{"height": 6, "width": 5}, 1).
		Then(mapOp("test_jitter", nil, 2, false))
	all, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ split, index int64 }
	run := func(plan []ProvidedSplit) map[key][]byte {
		t.Helper()
		ctx := context.Background()
		it, err := OpenWithOptions(ctx, spec, nil, Options{Provider: &planProvider{list: plan}, Track: true})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		out := map[key][]byte{}
		for {
			el, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			prov := it.(Tracker).LastProvenance()
			if len(prov) != 1 || prov[0].Indices.Len() != 1 {
				t.Fatalf("one element, provenance %v", prov)
			}
			var b bytes.Buffer
			for _, tn := range el.Tensors {
				b.WriteString(tn.Name)
				b.Write(tn.Data)
			}
			k := key{prov[0].Split, prov[0].Indices[0]}
			if _, dup := out[k]; dup {
				t.Fatalf("element %v twice", k)
			}
			out[k] = b.Bytes()
		}
	}
	var first []ProvidedSplit
	for _, s := range all {
		first = append(first, ProvidedSplit{Split: s, Epoch: 4})
	}
	base := run(first)
	if len(base) != 150 {
		t.Fatalf("first run: %d elements", len(base))
	}
	// Re-run in another order with Exclude sets.
	r := rand.New(rand.NewPCG(1, 2))
	var again []ProvidedSplit
	wantN := 0
	excludedAny := false
	for i := len(all) - 1; i >= 0; i-- {
		s := all[i]
		ex := randomExclude(r, s.End-s.Start)
		again = append(again, ProvidedSplit{Split: s, Epoch: 4, Exclude: ex})
		wantN += int(s.End - s.Start - ex.Len())
		excludedAny = excludedAny || !ex.Empty()
	}
	if !excludedAny {
		t.Fatal("nothing excluded")
	}
	rerun := run(again)
	if len(rerun) != wantN {
		t.Fatalf("re-run yielded %d elements, want %d", len(rerun), wantN)
	}
	for _, ps := range again {
		for i := int64(0); i < ps.Split.End-ps.Split.Start; i++ {
			got, ok := rerun[key{ps.Split.ID, i}]
			if ps.Exclude.Contains(i) {
				if ok {
					t.Fatalf("split %d element %d excluded but yielded", ps.Split.ID, i)
				}
				continue
			}
			if !ok || !bytes.Equal(got, base[key{ps.Split.ID, i}]) {
				t.Fatalf("split %d element %d differs from the first run (present %v)", ps.Split.ID, i, ok)
			}
		}
	}
	// The epoch seeds the random functions.
	var other []ProvidedSplit
	for _, s := range all {
		other = append(other, ProvidedSplit{Split: s, Epoch: 5})
	}
	differ := 0
	for k, b := range run(other) {
		if !bytes.Equal(b, base[k]) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("epoch 5 drew exactly what epoch 4 drew")
	}
}

// BenchmarkTrack measures what tracking costs: range → batch(64), one full
// pass per iteration.
//
//	go test -run XXX -bench Track -benchmem ./pipeline
func BenchmarkTrack(b *testing.B) {
	spec := NewSpec(rangeSource(1<<16, 1024)).Batch(64, false)
	all, err := Splits(spec)
	if err != nil {
		b.Fatal(err)
	}
	for _, track := range []bool{false, true} {
		name := "off"
		if track {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				it, err := OpenWithOptions(ctx, spec, all, Options{Track: track})
				if err != nil {
					b.Fatal(err)
				}
				tr, _ := it.(Tracker)
				for {
					if _, err := it.Next(ctx); err != nil {
						break
					}
					if tr != nil {
						_ = tr.LastProvenance()
						_ = tr.Completed()
					}
				}
				it.Close()
			}
		})
	}
}
