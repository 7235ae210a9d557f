package pipeline

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

// test_doc: value v → "tokens" int32 of a pseudo-random length in
// [0, max_len] (seeded by v and seed), token i being v*docStride+i+1, so
// every token of a run is unique and names its document and position.
const docStride = 1 << 20

func init() {
	fn.RegisterMapFactory("test_doc", func(a fn.Args) (fn.MapFn, error) {
		maxLen, err := a.Int("max_len", 10)
		if err != nil {
			return nil, err
		}
		seed, err := a.Int("seed", 0)
		if err != nil {
			return nil, err
		}
		return func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
			v := value(e)
			n := docLen(v, maxLen, seed)
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(v*docStride + int64(i) + 1)
			}
			t, err := tensor.FromInt32s("tokens", nil, toks)
			if err != nil {
				return e, err
			}
			return tensor.Element{Tensors: []tensor.Tensor{t, tensor.ScalarInt64("value", v)}}, nil
		}, nil
	})
}

func docLen(v, maxLen, seed int64) int {
	r := rand.New(rand.NewPCG(uint64(v), uint64(seed)))
	if r.IntN(8) == 0 {
		return 0
	}
	return r.IntN(int(maxLen) + 1)
}

func docTokens(v, maxLen, seed int64) []int64 {
	n := docLen(v, maxLen, seed)
	out := make([]int64, n)
	for i := range out {
		out[i] = v*docStride + int64(i) + 1
	}
	return out
}

type packedRow struct {
	tokens          []int64
	docs, positions []int32
}

func packedRows(t *testing.T, els []tensor.Element, length int) []packedRow {
	t.Helper()
	var rows []packedRow
	for _, e := range els {
		if len(e.Tensors) != 3 {
			t.Fatalf("row has %d tensors, want tokens, document_ids, positions", len(e.Tensors))
		}
		tok, _ := e.Get("tokens")
		d, _ := e.Get(PackDocumentIDs)
		p, _ := e.Get(PackPositions)
		if tok == nil || d == nil || p == nil || tok.Len() != int64(length) || d.Len() != int64(length) || p.Len() != int64(length) {
			t.Fatalf("row %+v: want three tensors of length %d", e, length)
		}
		v, err := tok.Int32s()
		if err != nil {
			t.Fatal(err)
		}
		r := packedRow{}
		for _, x := range v {
			r.tokens = append(r.tokens, int64(x))
		}
		r.docs, _ = d.Int32s()
		r.positions, _ = p.Int32s()
		rows = append(rows, r)
	}
	return rows
}

// segments checks a row's document ids and positions (ids 1, 2, … in
// order, positions 0, 1, … within each, zeros on padding at the end only)
// and returns its pieces.
func segments(t *testing.T, r packedRow, pad int64) [][]int64 {
	t.Helper()
	var segs [][]int64
	cur := int32(0)
	for i := range r.tokens {
		d, p := r.docs[i], r.positions[i]
		switch {
		case d == 0:
			if p != 0 || r.tokens[i] != pad {
				t.Fatalf("padding at %d: position %d token %d", i, p, r.tokens[i])
			}
			for j := i; j < len(r.docs); j++ {
				if r.docs[j] != 0 {
					t.Fatalf("document id %d after padding at %d", r.docs[j], i)
				}
			}
			return segs
		case d == cur:
			if int(p) != len(segs[len(segs)-1]) {
				t.Fatalf("position %d at %d, want %d", p, i, len(segs[len(segs)-1]))
			}
			segs[len(segs)-1] = append(segs[len(segs)-1], r.tokens[i])
		case d == cur+1:
			if p != 0 {
				t.Fatalf("document %d starts at position %d", d, p)
			}
			cur = d
			segs = append(segs, []int64{r.tokens[i]})
		default:
			t.Fatalf("document id %d after %d", d, cur)
		}
	}
	return segs
}

// TestPackProperties: over random documents, lengths and bins, every
// token of every document comes out once, rows are exactly length long,
// document ids and positions describe the pieces, first_fit never cuts a
// document that fits a row, and the padding statistic adds up.
func TestPackProperties(t *testing.T) {
	const eos = -1
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 60; trial++ {
		length := 1 + r.IntN(40)
		maxLen := int64(r.IntN(3*length + 2))
		count := int64(r.IntN(200))
		seed := int64(trial)
		useEOS := r.IntN(2) == 0
		strategy := []string{PackConcat, PackFirstFit}[trial%2]
		op := PackOp{Tensor: "tokens", Length: int64(length), Strategy: strategy, PadValue: -9}
		if useEOS {
			e := int64(eos)
			op.EOS = &e
		}
		if strategy == PackFirstFit {
			op.MaxOpenBins = int64(1 + r.IntN(6))
		}
		spec := NewSpec(Source{Range: &RangeSource{Stop: count, SplitSize: 1 + int64(r.IntN(30))}}).
			Then(Op{Map: &MapOp{Fn: "test_doc", Args: fn.Args{"max_len": maxLen, "seed": seed}}}).Pack(op)
		ctx := context.Background()
		sp, err := Splits(spec)
		if err != nil {
			t.Fatal(err)
		}
		it, err := Open(ctx, spec, sp)
		if err != nil {
			t.Fatal(err)
		}
		var els []tensor.Element
		for {
			e, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			els = append(els, e)
		}
		st := it.Stats()
		it.Close()
		rows := packedRows(t, els, length)

		var want, got []int64
		total := 0
		fits := map[int64]bool{}
		for v := int64(0); v < count; v++ {
			d := docTokens(v, maxLen, seed)
			if useEOS {
				d = append(d, eos)
			}
			want = append(want, d...)
			total += len(d)
			fits[v] = len(d) <= length
		}
		pieces := map[int64]int{}
		for _, row := range rows {
			prev := int64(-1)
			for _, s := range segments(t, row, -9) {
				got = append(got, s...)
				if s[0] != eos {
					doc := s[0] / docStride
					pieces[doc]++
					// One piece per document and row.
					if doc == prev {
						t.Fatalf("trial %d: document %d in two pieces of one row", trial, doc)
					}
					prev = doc
				}
			}
		}
		if strategy == PackConcat {
			// Documents in order, cut only at row ends.
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Fatalf("trial %d: concat tokens differ (%d vs %d)", trial, len(got), len(want))
			}
			if n := (total + length - 1) / length; len(rows) != n {
				t.Fatalf("trial %d: %d rows for %d tokens of length %d", trial, len(rows), total, length)
			}
		} else {
			if !sameMultiset(got, want) {
				t.Fatalf("trial %d: first_fit lost or duplicated tokens (%d vs %d)", trial, len(got), len(want))
			}
			for v, n := range pieces {
				if fits[v] && n != 1 {
					t.Fatalf("trial %d: document %d fits a row but is in %d pieces", trial, v, n)
				}
			}
		}
		o := st.Ops[len(st.Ops)-1]
		if o.PackedTokens != int64(total) || o.PaddingTokens != int64(len(rows)*length-total) {
			t.Fatalf("trial %d: stats %d packed %d padding; want %d, %d", trial, o.PackedTokens, o.PaddingTokens, total, len(rows)*length-total)
		}
	}
}

func sameMultiset(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[int64]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
		if m[x] < 0 {
			return false
		}
	}
	return true
}

// TestPackFirstFitBound: first_fit never holds more than max_open_bins
// rows, and fills the first row with room.
func TestPackFirstFitBound(t *testing.T) {
	p := packer{length: 10, firstFit: true, maxOpen: 2}
	add := func(n int) {
		p.add(item{}, make([]int64, n))
		if len(p.open) > 2 {
			t.Fatalf("%d rows open", len(p.open))
		}
	}
	add(6) // row A: 6
	add(6) // row B: 6
	add(3) // A: 9
	add(5) // no room: the fullest (A) goes, C: 5
	if len(p.ready) != 1 || len(p.ready[0].tokens) != 9 {
		t.Fatalf("ready %d rows, want A (9 tokens)", len(p.ready))
	}
	add(4) // B: 10, full: goes
	if len(p.ready) != 2 || len(p.ready[1].tokens) != 10 {
		t.Fatalf("want B full and ready")
	}
	add(25) // two rows of its own, 5 into C
	if len(p.ready) != 5 || len(p.open) != 0 {
		t.Fatalf("ready %d open %d; want 5 and 0 (C filled to 10)", len(p.ready), len(p.open))
	}
	p.flush()
	if len(p.ready) != 5 {
		t.Fatalf("flush of nothing made rows")
	}
}

// TestPackProvenance: with tracking, every document is accounted for once
// (by the row holding its last token), and every split completes with
// everything it read emitted or dropped.
func TestPackProvenance(t *testing.T) {
	for _, strategy := range []string{PackConcat, PackFirstFit} {
		spec := NewSpec(Source{Range: &RangeSource{Stop: 300, SplitSize: 17}}).
			Then(Op{Map: &MapOp{Fn: "test_doc", Args: fn.Args{"max_len": int64(30)}}}).
			Pack(PackOp{Tensor: "tokens", Length: 16, Strategy: strategy})
		ctx := context.Background()
		sp, _ := Splits(spec)
		it, err := OpenWithOptions(ctx, spec, sp, Options{Track: true})
		if err != nil {
			t.Fatal(err)
		}
		tr := it.(Tracker)
		seen := map[int64]int{}
		for {
			_, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, se := range tr.LastProvenance() {
				se.Indices.Each(func(i int64) bool { seen[se.Split*17+i]++; return true })
			}
		}
		var read, dropped int64
		for _, c := range tr.Completed() {
			read += c.Read
			dropped += c.Dropped
			if c.Read != c.Emitted.Len()+c.Dropped {
				t.Fatalf("%s: split %d read %d emitted %d dropped %d", strategy, c.Split, c.Read, c.Emitted.Len(), c.Dropped)
			}
		}
		it.Close()
		if read != 300 || int64(len(seen))+dropped != 300 {
			t.Fatalf("%s: read %d, seen %d, dropped %d; want 300", strategy, read, len(seen), dropped)
		}
		for v, n := range seen {
			if n != 1 {
				t.Fatalf("%s: document %d in the provenance of %d rows", strategy, v, n)
			}
		}
	}
}

func TestPackValidation(t *testing.T) {
	src := Source{Range: &RangeSource{Stop: 3}}
	big := int64(1 << 40)
	cases := []struct {
		op   PackOp
		want string
	}{
		{PackOp{Length: 8}, "ops[0].pack.tensor: missing"},
		{PackOp{Tensor: "tokens"}, "ops[0].pack.length: must be in [1, 4194304], got 0"},
		{PackOp{Tensor: "tokens", Length: 8, Strategy: "best_fit"}, `ops[0].pack.strategy: unknown strategy "best_fit" (known: concat, first_fit)`},
		{PackOp{Tensor: "tokens", Length: 8, MaxOpenBins: 4}, "ops[0].pack.max_open_bins: only with strategy first_fit"},
		{PackOp{Tensor: "tokens", Length: 8, Strategy: PackFirstFit, MaxOpenBins: -1}, "ops[0].pack.max_open_bins: must be in [1, 4096], got -1"},
		{PackOp{Tensor: "positions", Length: 8}, `ops[0].pack.tensor: "positions" is a tensor pack writes`},
	}
	for _, c := range cases {
		err := NewSpec(src).Pack(c.op).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.op, err, c.want)
		}
	}
	// eos that does not fit int32 tokens: a run-time error naming the op.
	spec := NewSpec(src).Then(Op{Map: &MapOp{Fn: "test_doc"}}).Pack(PackOp{Tensor: "tokens", Length: 4, EOS: &big})
	if _, err := runErr(spec); err == nil || !strings.Contains(err.Error(), "ops[1].pack.eos: 1099511627776 does not fit the int32 tensor") {
		t.Fatalf("got %v", err)
	}
	spec = NewSpec(src).Pack(PackOp{Tensor: "value", Length: 4})
	if _, err := runErr(spec); err == nil || !strings.Contains(err.Error(), `ops[0].pack: split 0 element 0: tensor "value" is int64[]; want int32 or int64 [n]`) {
		t.Fatalf("got %v", err)
	}
}

// TestPackYAMLFingerprint: the YAML form decodes strictly, fills its
// defaults (so spelling them out changes nothing) and every field changes
// the fingerprint.
func TestPackYAMLFingerprint(t *testing.T) {
	base := "source: {range: {stop: 10}}\nops:\n  - pack: {tensor: tokens, length: 2048%s}\n"
	fp := func(extra string) string {
		t.Helper()
		s, err := ParseYAML([]byte(strings.Replace(base, "%s", extra, 1)))
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	def := fp("")
	if fp(", strategy: concat") != def || fp(", pad_value: 0") != def {
		t.Fatal("spelling out a default changed the fingerprint")
	}
	if fp(", strategy: first_fit") != fp(", strategy: first_fit, max_open_bins: 8") {
		t.Fatal("max_open_bins default not filled")
	}
	seen := map[string]string{"": def}
	for _, extra := range []string{", eos: 50256", ", eos: 0", ", strategy: first_fit", ", strategy: first_fit, max_open_bins: 9", ", pad_value: 1"} {
		f := fp(extra)
		for k, v := range seen {
			if v == f {
				t.Fatalf("%q and %q have the same fingerprint", extra, k)
			}
		}
		seen[extra] = f
	}
	if _, err := ParseYAML([]byte("source: {range: {stop: 10}}\nops:\n  - pack: {tensor: tokens, length: 8, lenght: 9}\n")); err == nil || !strings.Contains(err.Error(), `unknown field "lenght"`) {
		t.Fatalf("got %v", err)
	}
}
