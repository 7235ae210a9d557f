package fn

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
)

const gpt2Tokenizer = "testdata/bpe/gpt2-tokenizer.json.gz"

type goldenCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func readGolden(t testing.TB) []goldenCase {
	t.Helper()
	f, err := os.Open("testdata/bpe/gpt2-golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTokenizeBPEGolden compares with the encodings four JavaScript
// references agreed on (scripts/bpe-golden): ASCII, contractions, numbers,
// white space runs, accents, CJK, emoji, <|endoftext|>, random mixes.
func TestTokenizeBPEGolden(t *testing.T) {
	golden := readGolden(t)
	if len(golden) < 300 {
		t.Fatalf("only %d golden cases", len(golden))
	}
	f := mustMap(t, "tokenize_bpe", Args{"tokenizer": gpt2Tokenizer})
	for _, c := range golden {
		e, err := f(&FnContext{}, text(c.Text))
		if err != nil {
			t.Fatalf("%q: %v", c.Text, err)
		}
		if got := int32s(t, e, "tokens"); !reflect.DeepEqual(got, append([]int32{}, c.IDs...)) {
			t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
}

// TestBPEMergeHeapMatchesScan: the two merge loops make the same merges
// (the heap is used for long words only, so golden texts barely reach it).
func TestBPEMergeHeapMatchesScan(t *testing.T) {
	m, err := loadCached(gpt2Tokenizer, loadHFTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range readGolden(t) {
		splitGPT2([]byte(c.Text), func(w []byte) {
			a, b := make([]int32, len(w)), make([]int32, len(w))
			for i, x := range w {
				a[i], b[i] = m.byteID[x], m.byteID[x]
			}
			na, nb := m.mergeScan(a), m.mergeHeap(b)
			if !reflect.DeepEqual(a[:na], b[:nb]) {
				t.Fatalf("%q: scan %v, heap %v", w, a[:na], b[:nb])
			}
		})
	}
}

func TestSplitGPT2(t *testing.T) {
	cases := map[string][]string{
		"Hello world":    {"Hello", " world"},
		"Hello  world":   {"Hello", " ", " world"},
		"a\n b":          {"a", "\n", " b"},
		"x   ":           {"x", "   "},
		"x \ty":          {"x", " ", "\t", "y"},
		"I'm 'll've":     {"I", "'m", " '", "ll", "'ve"},
		" 123abc!!":      {" 123", "abc", "!!"},
		"\xff\xfeab":     {"\xff\xfe", "ab"},
		"é中😀":            {"é中", "😀"},
		"a\u00a0\u00a0b": {"a", "\u00a0", "\u00a0", "b"}, // only U+0020 prefixes a word
		"it's\u0085next": {"it", "'s", "\u0085", "next"},
	}
	for in, want := range cases {
		var got []string
		splitGPT2([]byte(in), func(p []byte) { got = append(got, string(p)) })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestTokenizeBPEInvalidUTF8(t *testing.T) {
	f := mustMap(t, "tokenize_bpe", Args{"tokenizer": gpt2Tokenizer})
	in := "caf\xe9 \xff\xfe<|endoftext|>\xc3"
	e, err := f(&FnContext{}, text(in))
	if err != nil {
		t.Fatal(err)
	}
	ids := int32s(t, e, "tokens")
	m, _ := loadCached(gpt2Tokenizer, loadHFTokenizer)
	// Decoding the ids gives the input's bytes back.
	if got := decodeIDs(m, ids); got != in {
		t.Fatalf("round trip: got %q, want %q", got, in)
	}
	if utf8.ValidString(in) {
		t.Fatal("test input should be invalid UTF-8")
	}
}

var inverse = struct {
	sync.Once
	m map[int32]string
}{}

func decodeIDs(m *bpeModel, ids []int32) string {
	inverse.Do(func() {
		inverse.m = make(map[int32]string, len(m.vocab))
		for s, id := range m.vocab {
			inverse.m[id] = s
		}
	})
	inv := inverse.m
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(inv[id])
	}
	return b.String()
}

func writeTokenizer(t *testing.T, mutate func(map[string]any)) string {
	t.Helper()
	data, err := readTokenizerFile(gpt2Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	var tj map[string]any
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatal(err)
	}
	mutate(tj)
	out, err := json.Marshal(tj)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenizeBPEArrayMerges(t *testing.T) {
	// tokenizers ≥ 0.20 writes merges as pairs; the encoding is the same.
	p := writeTokenizer(t, func(tj map[string]any) {
		md := tj["model"].(map[string]any)
		ms := md["merges"].([]any)
		for i, m := range ms {
			l, r, _ := strings.Cut(m.(string), " ")
			ms[i] = []string{l, r}
		}
	})
	f := mustMap(t, "tokenize_bpe", Args{"tokenizer": p})
	for _, c := range readGolden(t)[:40] {
		e, err := f(&FnContext{}, text(c.Text))
		if err != nil {
			t.Fatal(err)
		}
		if got := int32s(t, e, "tokens"); !reflect.DeepEqual(got, append([]int32{}, c.IDs...)) {
			t.Errorf("%q: got %v, want %v", c.Text, got, c.IDs)
		}
	}
}

func TestTokenizeBPERejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"wordpiece", func(tj map[string]any) { tj["model"].(map[string]any)["type"] = "WordPiece" }, `model.type: "WordPiece" is not supported`},
		{"metaspace", func(tj map[string]any) { tj["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, `pre_tokenizer: {"type":"Metaspace"} is not supported`},
		{"prefix space", func(tj map[string]any) { tj["pre_tokenizer"].(map[string]any)["add_prefix_space"] = true }, "pre_tokenizer.add_prefix_space: true is not supported"},
		{"normalizer", func(tj map[string]any) { tj["normalizer"] = map[string]any{"type": "NFC"} }, "normalizer: "},
		{"byte fallback", func(tj map[string]any) { tj["model"].(map[string]any)["byte_fallback"] = true }, "model.byte_fallback"},
		{"lstrip", func(tj map[string]any) { tj["added_tokens"].([]any)[0].(map[string]any)["lstrip"] = true }, "added_tokens[0]: single_word, lstrip"},
		{"bad merge", func(tj map[string]any) { tj["model"].(map[string]any)["merges"].([]any)[3] = "nosuch token" }, `model.merges[3]: "nosuch" + "token"`},
		{"missing byte", func(tj map[string]any) { delete(tj["model"].(map[string]any)["vocab"].(map[string]any), "!") }, "model.vocab: no token for byte 0x21"},
		{"not bytelevel", func(tj map[string]any) { tj["model"].(map[string]any)["vocab"].(map[string]any)["\u4e2d"] = 7 }, "is not byte-level"},
		{"no vocab", func(tj map[string]any) { delete(tj["model"].(map[string]any), "vocab") }, "model.vocab: missing or empty"},
		{"vocab type", func(tj map[string]any) { tj["model"].(map[string]any)["vocab"] = []any{1} }, "model.vocab: offset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeTokenizer(t, c.mutate)
			f, _ := LookupMap("tokenize_bpe")
			_, err := f(Args{"tokenizer": p})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("got %v, want an error naming %s and %q", err, p, c.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "broken.json")
	os.WriteFile(p, []byte(`{"model": {"type": "BPE", "vocab": {"a": 1,}}}`), 0o644)
	f, _ := LookupMap("tokenize_bpe")
	if _, err := f(Args{"tokenizer": p}); err == nil || !strings.Contains(err.Error(), p+": offset 44: not valid JSON") {
		t.Fatalf("got %v", err)
	}
	for _, a := range []Args{{}, {"tokenizer": ""}, {"tokenizer": 3}, {"tokenizer": gpt2Tokenizer, "vocab_size": 3}, {"tokenizer": "/nonexistent/tok.json"}} {
		if _, err := f(a); err == nil || !strings.HasPrefix(err.Error(), "tokenize_bpe: ") {
			t.Errorf("%v: got %v", a, err)
		}
	}
}

// TestTokenizeBPELoadedOnce: the same file is parsed once per process.
func TestTokenizeBPELoadedOnce(t *testing.T) {
	a, err := loadCached(gpt2Tokenizer, loadHFTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(gpt2Tokenizer)
	b, err := loadCached(abs, loadHFTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("loaded twice")
	}
}

func FuzzTokenizeBPE(f *testing.F) {
	for _, s := range []string{"", "Hello world", "I'm  \n\tok<|endoftext|>", "\xff\xfe", "中文 😀 1234", strings.Repeat("ab", 100)} {
		f.Add(s)
	}
	m, err := loadCached(gpt2Tokenizer, loadHFTokenizer)
	if err != nil {
		f.Fatal(err)
	}
	fn := mustMapF(f, Args{"tokenizer": gpt2Tokenizer})
	f.Fuzz(func(t *testing.T, s string) {
		e, err := fn(&FnContext{}, text(s))
		if err != nil {
			t.Fatal(err)
		}
		// Byte-level BPE loses nothing: the ids decode to the input.
		if got := decodeIDs(m, int32s(t, e, "tokens")); got != s {
			t.Fatalf("round trip: %q -> %q", s, got)
		}
		var n int
		splitGPT2([]byte(s), func(p []byte) {
			if len(p) == 0 {
				t.Fatal("empty piece")
			}
			n += len(p)
		})
		if n != len(s) {
			t.Fatalf("pieces cover %d of %d bytes", n, len(s))
		}
	})
}

func mustMapF(f *testing.F, args Args) MapFn {
	fac, _ := LookupMap("tokenize_bpe")
	fn, err := fac(args)
	if err != nil {
		f.Fatal(err)
	}
	return fn
}

// BenchmarkTokenizeBPE reports tokens/s of tokenize_bpe (GPT-2) on the
// file named by FEEDMESH_BPE_BENCH_TEXT (scripts/bpe-golden/bench.sh runs
// it next to node's gpt-tokenizer on the same file), else on the golden
// texts. The text is cut into paragraphs, one element each.
func BenchmarkTokenizeBPE(b *testing.B) {
	var data []byte
	if p := os.Getenv("FEEDMESH_BPE_BENCH_TEXT"); p != "" {
		var err error
		if data, err = os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
	} else {
		for _, c := range readGolden(b) {
			data = append(append(data, c.Text...), "\n\n"...)
		}
	}
	fac, _ := LookupMap("tokenize_bpe")
	f, err := fac(Args{"tokenizer": gpt2Tokenizer})
	if err != nil {
		b.Fatal(err)
	}
	var elems []tensor.Element
	for _, p := range strings.SplitAfter(string(data), "\n\n") {
		elems = append(elems, text(p))
	}
	b.SetBytes(int64(len(data)))
	tokens := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, e := range elems {
			out, err := f(&FnContext{}, e)
			if err != nil {
				b.Fatal(err)
			}
			t, _ := out.Get("tokens")
			tokens += int(t.Len())
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}
