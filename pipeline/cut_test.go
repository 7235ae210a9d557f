package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

func cutSpec(t *testing.T, parallel int) *Spec {
	t.Helper()
	s, err := ParseYAML([]byte(`
source: {range: {stop: 1000, split_size: 64}}
seed: 3
ops:
  - shuffle: {buffer: 16, seed: 5}
  - map: {fn: test_rand, parallelism: ` + strconv.Itoa(parallel) + `}
  - filter: {fn: test_even}
  - map: {fn: test_vec}
  - padded_batch: {size: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckCut(t *testing.T) {
	s := cutSpec(t, 1)
	if got := s.Cuts(); !reflect.DeepEqual(got, []int{1, 2, 3, 4}) {
		t.Errorf("Cuts = %v, want [1 2 3 4]", got)
	}
	withOps := func(ops string) *Spec {
		x, err := ParseYAML([]byte("source: {range: {stop: 10}}\nops:\n" + ops))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct {
		name string
		spec *Spec
		cut  int
		want string
	}{
		{"zero", s, 0, "want 1 up to"},
		{"negative", s, -2, "want 1 up to"},
		{"at-end", s, 5, "leaves at least one to the consumer (cut points: 1..4)"},
		{"past-end", s, 9, "the pipeline has 5 ops"},
		{"batch-before", withOps("  - batch: {size: 2}\n  - map: {fn: test_double}\n"), 1, "ops[0] (batch) comes before the cut and groups elements"},
		{"take-after", withOps("  - map: {fn: test_double}\n  - take: 3\n"), 1, "ops[1] (take) comes after the cut"},
		{"autocache-after", withOps("  - map: {fn: test_double}\n  - autocache:\n  - batch: {size: 2}\n"), 1, "ops[1] (autocache)"},
	} {
		err := c.spec.CheckCut(c.cut)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckCut(%d) = %v, want %q", c.name, c.cut, err, c.want)
		}
	}
}

// TestOpenSuffixMatchesWhole runs the prefix of a cut pipeline as a node
// would (tracked, one element at a time) and its suffix over what it
// yields, as a consumer would: every cut gives the whole pipeline's
// batches, byte for byte, seeded random maps included, and each batch
// names the same source elements.
func TestOpenSuffixMatchesWhole(t *testing.T) {
	ctx := context.Background()
	for _, par := range []int{1, 4} {
		s := cutSpec(t, par)
		want, wantProv := runTracked(t, s, func(it Iterator) Iterator { return it })
		if len(want) < 50 {
			t.Fatalf("whole pipeline: %d batches", len(want))
		}
		for _, cut := range s.Cuts() {
			got, gotProv := runTracked(t, s.Prefix(cut), func(pre Iterator) Iterator {
				tr := pre.(Tracker)
				suf, err := OpenSuffix(ctx, s, cut, func(ctx context.Context) (CutElement, error) {
					e, err := pre.Next(ctx)
					if err != nil {
						return CutElement{}, err
					}
					p := tr.LastProvenance()
					if len(p) != 1 || p[0].Indices.Len() != 1 {
						return CutElement{}, errors.New("a prefix element made of several source elements")
					}
					return CutElement{Element: e, Epoch: p[0].Epoch, Split: p[0].Split, Index: p[0].Indices[0]}, nil
				}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				return suf
			})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parallelism %d, cut %d: %d batches differ from the whole pipeline's %d", par, cut, len(got), len(want))
			}
			if !reflect.DeepEqual(gotProv[:len(got)], wantProv) {
				t.Errorf("parallelism %d, cut %d: provenance differs", par, cut)
			}
			// What the suffix returned and what it dropped name every
			// source element once.
			seen := map[string]int{}
			for _, p := range gotProv {
				for _, e := range strings.Split(p, ";") {
					if e == "" {
						continue
					}
					head, idx, _ := strings.Cut(e, ":")
					for _, i := range strings.Split(strings.TrimSuffix(idx, ","), ",") {
						seen[head+"/"+i]++
					}
				}
			}
			want := 1000 // the filter (ops[2]) runs after the cut
			if cut > 2 {
				want = 500 // before it: the suffix sees the even ones
			}
			if len(seen) != want {
				t.Errorf("parallelism %d, cut %d: returned and dropped name %d source elements, want %d", par, cut, len(seen), want)
			}
			for k, n := range seen {
				if n != 1 {
					t.Errorf("parallelism %d, cut %d: element %s named %d times", par, cut, k, n)
					break
				}
			}
		}
	}
}

// runTracked opens spec tracked over all its splits, wraps the iterator,
// and returns what the wrapper yields and each output's provenance; a
// Dropper's drops follow, one string per drop.
func runTracked(t *testing.T, spec *Spec, wrap func(Iterator) Iterator) ([]Element, []string) {
	t.Helper()
	ctx := context.Background()
	ss, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	base, err := OpenWithOptions(ctx, spec, ss, Options{Track: true})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	it := wrap(base)
	if it != base {
		defer it.Close()
	}
	var out []Element
	var prov []string
	for {
		e, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			if d, ok := it.(Dropper); ok {
				for _, s := range d.Dropped() {
					prov = append(prov, provString([]SplitElements{s}))
				}
			}
			return out, prov
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
		prov = append(prov, provString(it.(Tracker).LastProvenance()))
	}
}

func provString(p []SplitElements) string {
	var b strings.Builder
	for _, s := range p {
		fmt.Fprintf(&b, "%d/%d:", s.Epoch, s.Split)
		for k := 0; k+1 < len(s.Indices); k += 2 {
			for i := s.Indices[k]; i < s.Indices[k+1]; i++ {
				fmt.Fprintf(&b, "%d,", i)
			}
		}
		b.WriteString(";")
	}
	return b.String()
}

// TestSuffixDroppedBounded: a filter after the cut that drops everything
// lists its drops as runs (one per split read in order) and at most
// maxCutDropped entries between two takes, however long the input.
func TestSuffixDroppedBounded(t *testing.T) {
	s, err := ParseYAML([]byte("source: {range: {stop: 10}}\nops:\n  - map: {fn: test_double}\n  - filter: {fn: test_even}\n  - batch: {size: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		n           int64
		interleaved bool
		want        int
	}{
		{"in-order", 10000, false, 2},               // two splits, one after the other: one run each
		{"interleaved", 10000, true, maxCutDropped}, // no run continues the last: capped
	} {
		var i int64
		next := func(context.Context) (CutElement, error) {
			if i == tc.n {
				return CutElement{}, io.EOF
			}
			split, idx := i/(tc.n/2), i%(tc.n/2)
			if tc.interleaved {
				split, idx = i%2, i/2
			}
			i++
			// Odd values: test_even drops every one.
			return CutElement{Element: Element{Tensors: []tensor.Tensor{tensor.ScalarInt64("value", 2*i+1)}}, Split: split, Index: idx}, nil
		}
		it, err := OpenSuffix(ctx, s, 1, next, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := it.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: Next = %v, want io.EOF (everything dropped)", tc.name, err)
		}
		d := it.(Dropper).Dropped()
		it.Close()
		if len(d) != tc.want {
			t.Errorf("%s: %d entries, want %d", tc.name, len(d), tc.want)
		}
		if !tc.interleaved && (d[0].Indices.Len() != tc.n/2 || d[1].Indices.Len() != tc.n/2) {
			t.Errorf("%s: runs %v and %v, want %d positions each", tc.name, d[0].Indices, d[1].Indices, tc.n/2)
		}
	}
}
