package pipeline

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/internal/autocache"
	"github.com/feedmesh/feedmesh/ranges"
)

// storeCache is the pipeline.Cache of these tests: the real disk store,
// always in use (mode cache) unless off.
type storeCache struct {
	s        *autocache.Store
	off      bool
	observed int64
}

func (c *storeCache) Use(AutocachePoint) bool { return !c.off }
func (c *storeCache) Get(_ context.Context, p AutocachePoint, split int64, source string) (CachedSplit, bool) {
	r, ok := c.s.GetSource(autocache.Key{Prefix: p.Prefix, Split: split}, source)
	if !ok {
		return nil, false
	}
	return r, true
}
func (c *storeCache) Put(p AutocachePoint, split int64, source string) (CacheWriter, error) {
	return c.s.Create(autocache.Key{Prefix: p.Prefix, Split: split}, source)
}
func (c *storeCache) Observe(_ AutocachePoint, n, _, _ int64) { c.observed += n }

func newStoreCache(t *testing.T, dir string) *storeCache {
	t.Helper()
	s, err := autocache.Open(autocache.Config{Dir: dir, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return &storeCache{s: s}
}

func rangeOf(n, split int64) Source {
	s := FromRange(0, n, 1)
	s.Range.SplitSize = split
	return s
}

// cachedSpec: range [0, 100) in splits of 10, doubled (deterministic),
// filtered (even: all of them), autocache, then a random op.
func cachedSpec() *Spec {
	return NewSpec(rangeOf(100, 10)).Map("test_double", nil, 2).Filter("test_even", nil).
		AutocacheMode(AutocacheCache).Map("test_rand", nil, 1)
}

func runCached(t *testing.T, spec *Spec, c Cache, epoch int) (vals []int64, rs []int64, st Stats) {
	t.Helper()
	ss, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	it, err := OpenWithOptions(context.Background(), spec, ss, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for {
		el, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		v, _ := el.Get("value")
		r, _ := el.Get("r")
		x, _ := v.Int64Value()
		y, _ := r.Int64Value()
		vals, rs = append(vals, x), append(rs, y)
	}
	return vals, rs, it.Stats()
}

func TestAutocachePutThenGet(t *testing.T) {
	c := newStoreCache(t, t.TempDir())
	spec := cachedSpec()
	want, _, _ := runCached(t, spec, nil, 0) // no cache: the op passes through
	v1, r1, st1 := runCached(t, spec, c, 0)
	if !slices.Equal(v1, want) {
		t.Fatalf("put run yields %v, want %v", v1, want)
	}
	if a := st1.Autocache; a == nil || a.Put != 10 || a.Got != 0 || a.Elements != 100 {
		t.Fatalf("first run: %+v, want 10 splits put, 100 elements computed", a)
	}
	if c.observed != 100 {
		t.Fatalf("observed %d elements", c.observed)
	}
	v2, r2, st2 := runCached(t, spec, c, 1)
	if !slices.Equal(v2, want) {
		t.Fatalf("get run yields %v, want %v", v2, want)
	}
	if a := st2.Autocache; a.Got != 10 || a.Put != 0 || a.Elements != 0 {
		t.Fatalf("second run: %+v, want 10 splits got, none computed", a)
	}
	// The op after autocache still runs, with the same seed per
	// (split, element) in the same epoch.
	if !slices.Equal(r1, r2) {
		t.Fatal("random op after autocache differs between two runs of epoch 0")
	}
	// A second spec with the same prefix (another suffix) reads the cache.
	other := NewSpec(rangeOf(100, 10)).Map("test_double", nil, 1).Filter("test_even", nil).Prefetch(4).
		AutocacheMode(AutocacheCache).Batch(7, false)
	p1, _ := spec.AutocachePoints()
	p2, _ := other.AutocachePoints()
	if p1[0].Prefix != p2[0].Prefix {
		t.Fatal("parallelism or a prefetch changed the prefix fingerprint")
	}
	ss, _ := Splits(other)
	it, err := OpenWithOptions(context.Background(), other, ss, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, it, nil)
	st := it.Stats()
	it.Close()
	if len(got) != 100 || st.Autocache.Got != 10 {
		t.Fatalf("other job: %d values, %+v", len(got), st.Autocache)
	}
}

func TestAutocacheEpochsDifferAfterThePoint(t *testing.T) {
	c := newStoreCache(t, t.TempDir())
	spec := cachedSpec().Repeat(2)
	_, rs, st := runCached(t, spec, c, 0)
	if st.Autocache.Put != 10 || st.Autocache.Got != 10 {
		t.Fatalf("two passes: %+v, want the first put, the second got", st.Autocache)
	}
	if slices.Equal(rs[:100], rs[100:]) {
		t.Fatal("the random op after autocache is the same in both passes")
	}
}

func TestAutocacheCorruptFileRecomputed(t *testing.T) {
	dir := t.TempDir()
	c := newStoreCache(t, dir)
	spec := cachedSpec()
	want, _, _ := runCached(t, spec, c, 0)
	pts, _ := spec.AutocachePoints()
	// Damage the last record of split 3 and truncate split 5.
	p3 := filepath.Join(dir, pts[0].Prefix, "3.fmc")
	b, _ := os.ReadFile(p3)
	b[len(b)-30] ^= 0xff
	os.WriteFile(p3, b, 0o644)
	p5 := filepath.Join(dir, pts[0].Prefix, "5.fmc")
	b, _ = os.ReadFile(p5)
	os.WriteFile(p5, b[:len(b)-10], 0o644)
	got, _, st := runCached(t, spec, c, 0)
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Fatalf("after corruption yields %v, want %v", got, w)
	}
	a := st.Autocache
	if a.Recomputed != 1 || a.Put != 1 || a.Got != 9 {
		t.Fatalf("%+v: want split 3 recomputed after a corrupt record, split 5 (truncated) put again", a)
	}
	if s := c.s.Stats(); s.Corrupt != 2 {
		t.Fatalf("store: %+v, want 2 corrupt files dropped", s)
	}
}

// With a provider and tracking (exactly-once DYNAMIC): excluded positions
// are skipped on a get as on a compute, and every split completes with
// the positions it emitted.
func TestAutocacheProviderExcludeAndTracking(t *testing.T) {
	c := newStoreCache(t, t.TempDir())
	spec := NewSpec(rangeOf(40, 10)).Map("test_double", nil, 1).AutocacheMode(AutocacheCache).Batch(3, false)
	ss, _ := Splits(spec)
	for run := 0; run < 2; run++ {
		var list []ProvidedSplit
		for _, s := range ss {
			ps := ProvidedSplit{Split: s, Epoch: int64(run)}
			if s.ID == 1 {
				ps.Exclude = ranges.Of(0, 5)
			}
			list = append(list, ps)
		}
		it, err := OpenWithOptions(context.Background(), spec, nil, Options{Cache: c, Provider: &psProvider{list: list}, Track: true})
		if err != nil {
			t.Fatal(err)
		}
		tr := it.(Tracker)
		var n int64
		var done []CompletedSplit
		for {
			el, err := it.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			v, _ := el.Get("value")
			n += v.NumValues()
			done = append(done, tr.Completed()...)
		}
		done = append(done, tr.Completed()...)
		st := it.Stats()
		it.Close()
		if n != 38 || len(done) != len(ss) {
			t.Fatalf("run %d: %d elements, %d splits completed; want 38, %d", run, n, len(done), len(ss))
		}
		for _, d := range done {
			if d.Split == 1 && (d.Emitted.Contains(0) || d.Emitted.Contains(5) || d.Emitted.Len() != 8) {
				t.Fatalf("run %d: split 1 emitted %v", run, d.Emitted)
			}
		}
		// Split 1 is never put (it was not read whole): computed both times.
		if run == 1 && (st.Autocache.Got != int64(len(ss)-1)) {
			t.Fatalf("second run: %+v", st.Autocache)
		}
	}
}

type psProvider struct{ list []ProvidedSplit }

func (p *psProvider) Next(context.Context) (ProvidedSplit, error) {
	if len(p.list) == 0 {
		return ProvidedSplit{}, io.EOF
	}
	ps := p.list[0]
	p.list = p.list[1:]
	return ps, nil
}

func TestAutocacheSpecForms(t *testing.T) {
	y, err := ParseYAML([]byte("source: {range: {start: 0, stop: 10}}\nops:\n  - map: {fn: test_double}\n  - autocache:\n  - batch: {size: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseJSON([]byte(`{"source": {"range": {"start": 0, "stop": 10}}, "ops": [{"map": {"fn": "test_double"}}, {"autocache": {"mode": "auto"}}, {"batch": {"size": 2}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b := NewSpec(FromRange(0, 10, 1)).Map("test_double", nil, 1).Autocache().Batch(2, false)
	fy, _ := y.Fingerprint()
	fj, _ := j.Fingerprint()
	fb, _ := b.Fingerprint()
	if fy != fj || fy != fb {
		t.Fatalf("fingerprints differ: yaml %s json %s builder %s", fy, fj, fb)
	}
	short, err := ParseYAML([]byte("source: {range: {start: 0, stop: 10}}\nops:\n  - autocache: cache\n"))
	if err != nil || short.Ops[0].Autocache.Mode != AutocacheCache {
		t.Fatalf("shorthand: %+v, %v", short, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"  - shuffle: {buffer: 4}\n  - autocache:\n", "ops[1].autocache: ops[0] is a shuffle: only map, filter, cost and prefetch"},
		{"  - batch: {size: 2}\n  - autocache:\n", "ops[0] is a batch"},
		{"  - autocache:\n  - autocache:\n", "ops[1].autocache: a second autocache op"},
		{"  - autocache: sometimes\n", `ops[0].autocache.mode: unknown mode "sometimes"`},
		{"  - autocache: {mode: cache, size: 3}\n", `unknown field "size"`},
	} {
		_, err := ParseYAML([]byte("source: {range: {start: 0, stop: 10}}\nops:\n" + c.yaml))
		if err == nil {
			s, _ := ParseYAML([]byte("source: {range: {start: 0, stop: 10}}\nops:\n" + c.yaml))
			err = s.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to say %q", c.yaml, err, c.want)
		}
	}
}
