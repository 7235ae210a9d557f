package fn

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/tensor"
)

const gpt2Tokenizer = "testdata/bpe/gpt2-tokenizer.json.gz"

type goldenCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func readGolden(t testing.TB) []goldenCase {
	return readGoldenFile(t, "testdata/bpe/gpt2-golden.jsonl")
}

func readGoldenFile(t testing.TB, path string) []goldenCase {
	t.Helper()
	f, err := os.Open(path)
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
	m, err := loadCached(gpt2Tokenizer, "", loadHFTokenizer)
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
	m, _ := loadCached(gpt2Tokenizer, "", loadHFTokenizer)
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

// writeTokenizer writes base (GPT-2's tokenizer.json when nil) changed by
// mutate to a temporary file.
func writeTokenizer(t *testing.T, base []byte, mutate func(map[string]any)) string {
	t.Helper()
	data := base
	if data == nil {
		var err error
		if data, err = readTokenizerFile(gpt2Tokenizer); err != nil {
			t.Fatal(err)
		}
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
	p := writeTokenizer(t, nil, func(tj map[string]any) {
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
		{"unknown split", func(tj map[string]any) {
			tj["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\\w+`}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel", "use_regex": false}}}
		}, `pre_tokenizer.pretokenizers[0].pattern.Regex: "\\\\w+" is not a pattern tokenize_bpe implements`},
		{"split behavior", func(tj map[string]any) {
			tj["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternCL100K}, "behavior": "Removed"},
				map[string]any{"type": "ByteLevel", "use_regex": false}}}
		}, `pre_tokenizer.pretokenizers[0]: behavior "Removed", invert false is not supported`},
		{"double regex", func(tj map[string]any) {
			tj["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternCL100K}, "behavior": "Isolated"},
				map[string]any{"type": "ByteLevel"}}}
		}, "pre_tokenizer.pretokenizers[1].use_regex: true is not supported here (want false)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A small byte-level tokenizer: the checks do not depend on its size.
			p := writeTokenizer(t, tinyTokenizerJSON(), c.mutate)
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
	a, err := loadCached(gpt2Tokenizer, "", loadHFTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(gpt2Tokenizer)
	b, err := loadCached(abs, "", loadHFTokenizer)
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
	m, err := loadCached(gpt2Tokenizer, "", loadHFTokenizer)
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
		for _, split := range []func([]byte, func([]byte)){splitGPT2, splitCL100K, splitO200K} {
			var n int
			split([]byte(s), func(p []byte) {
				if len(p) == 0 {
					t.Fatal("empty piece")
				}
				n += len(p)
			})
			if n != len(s) {
				t.Fatalf("pieces cover %d of %d bytes", n, len(s))
			}
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

// BenchmarkTokenizeBPE reports tokens/s of tokenize_bpe (GPT-2's and
// cl100k's tokenizer.json) on the file named by FEEDMESH_BPE_BENCH_TEXT
// (scripts/bpe-golden/bench.sh runs it next to node's gpt-tokenizer on the
// same file), else on the golden texts. The text is cut into paragraphs,
// one element each.
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
	var elems []tensor.Element
	for _, p := range strings.SplitAfter(string(data), "\n\n") {
		elems = append(elems, text(p))
	}
	for _, tc := range []struct{ name, tokenizer string }{{"gpt2", gpt2Tokenizer}, {"cl100k", cl100kTokenizer}} {
		b.Run(tc.name, func(b *testing.B) {
			fac, _ := LookupMap("tokenize_bpe")
			f, err := fac(Args{"tokenizer": tc.tokenizer})
			if err != nil {
				b.Fatal(err)
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
		})
	}
}

// tinyTokenizerJSON is a byte-level BPE tokenizer.json with the 256 byte
// tokens and a few merges, for fuzzing the loader.
func tinyTokenizerJSON() []byte {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	var merges []string
	for _, m := range [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}, {"o", "r"}} {
		merges = append(merges, m[0]+" "+m[1])
		vocab[m[0]+m[1]] = len(vocab)
	}
	tj := map[string]any{
		"added_tokens":  []any{map[string]any{"id": 999, "content": "<|x|>"}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	out, _ := json.Marshal(tj)
	return out
}

// FuzzLoadHFTokenizer: any tokenizer.json is loaded or refused with an
// error naming the file; one that loads encodes without panicking.
func FuzzLoadHFTokenizer(f *testing.F) {
	f.Add(tinyTokenizerJSON(), "hello world<|x|>")
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`), "a")
	f.Add([]byte(`{"model": {"type": "BPE", "merges": [["a", "b"], 3]}}`), "")
	f.Add([]byte(`{"added_tokens": [{"id": -1, "content": ""}]}`), "x")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		m, err := loadHFTokenizer("fuzz.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		m.encode(nil, []byte(text))
	})
}

const cl100kTokenizer = "testdata/bpe/cl100k-tokenizer.json.gz"

// checkGolden runs f over golden cases and compares the ids.
func checkGolden(t *testing.T, f MapFn, golden []goldenCase) {
	t.Helper()
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

// TestTokenizeBPEGoldenCL100K: a tokenizer.json in Llama 3's layout (Split
// by cl100k's pattern, then ByteLevel; ignore_merges) against what
// js-tiktoken, @huggingface/tokenizers and gpt-tokenizer agreed on.
func TestTokenizeBPEGoldenCL100K(t *testing.T) {
	golden := readGoldenFile(t, "testdata/bpe/cl100k-golden.jsonl")
	if len(golden) < 600 {
		t.Fatalf("only %d golden cases", len(golden))
	}
	checkGolden(t, mustMap(t, "tokenize_bpe", Args{"tokenizer": cl100kTokenizer}), golden)
}

// writeRankFile writes a tiktoken rank file (base64 token, rank) holding a
// tokenizer.json's vocabulary, leaving out the added tokens (rank files
// have none): the format OpenAI publishes cl100k_base.tiktoken in.
func writeRankFile(t *testing.T, tokenizerJSON string) string {
	t.Helper()
	data, err := readTokenizerFile(tokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	var tj hfTokenizer
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatal(err)
	}
	added := map[string]bool{}
	for _, a := range tj.AddedTokens {
		added[a.Content] = true
	}
	byRank := make([]string, 0, len(tj.Model.Vocab))
	for tok, id := range tj.Model.Vocab {
		if added[tok] {
			continue
		}
		raw, ok := unByteLevel(tok)
		if !ok {
			t.Fatalf("token %q", tok)
		}
		byRank = append(byRank, fmt.Sprintf("%012d %s %d", id, base64.StdEncoding.EncodeToString([]byte(raw)), id))
	}
	sort.Strings(byRank)
	var b strings.Builder
	for _, l := range byRank {
		b.WriteString(l[13:] + "\n")
	}
	p := filepath.Join(t.TempDir(), "ranks.tiktoken")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenizeTiktokenGolden(t *testing.T) {
	for _, c := range []struct{ enc, tokenizer, golden string }{
		{"cl100k_base", cl100kTokenizer, "testdata/bpe/cl100k-golden.jsonl"},
		{"r50k_base", gpt2Tokenizer, "testdata/bpe/gpt2-golden.jsonl"},
		{"o200k_base", "", "testdata/bpe/o200k-golden.jsonl"},
	} {
		t.Run(c.enc, func(t *testing.T) {
			if testing.Short() && c.enc == "o200k_base" {
				t.Skip("-short: loading 200,000 ranks is slow under -race; go test without -short checks it")
			}
			ranks := "testdata/bpe/o200k_base.tiktoken.gz" // as OpenAI publishes it, gzipped
			if c.tokenizer != "" {
				ranks = writeRankFile(t, c.tokenizer)
			}
			golden := readGoldenFile(t, c.golden)
			if len(golden) < 300 {
				t.Fatalf("only %d golden cases", len(golden))
			}
			checkGolden(t, mustMap(t, "tokenize_tiktoken", Args{"tokenizer": ranks, "encoding": c.enc}), golden)
		})
	}
}

func TestSplitO200K(t *testing.T) {
	cases := map[string][]string{
		"HelloWorld":       {"Hello", "World"},
		"XMLHttpRequest":   {"XMLHttp", "Request"},
		"McDonald's DON'T": {"Mc", "Donald's", " DON'T"},
		"iPhone 12345":     {"i", "Phone", " ", "123", "45"},
		"a/b// \n":         {"a", "/b", "//", " \n"},
		"中文 e\u0301te":     {"中文", " e\u0301te"},
		"\u0301alone":      {"\u0301alone"},
		"x  y\xff\xfez":    {"x", " ", " y", "\xff\xfe", "z"},
	}
	for in, want := range cases {
		var got []string
		splitO200K([]byte(in), func(p []byte) { got = append(got, string(p)) })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestTokenizeTiktokenRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	all := func(extra string) string {
		var b strings.Builder
		for i := 0; i < 256; i++ {
			fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{byte(i)}), i)
		}
		return b.String() + extra
	}
	f, _ := LookupMap("tokenize_tiktoken")
	cases := []struct {
		args Args
		want string
	}{
		{Args{"tokenizer": write("a", all("")), "encoding": "o100k_base"}, `encoding: "o100k_base" is not supported (known: cl100k_base, o200k_base, p50k_base, r50k_base)`},
		{Args{"tokenizer": write("b", all(""))}, "encoding: required"},
		{Args{"tokenizer": write("c", all("YWI=\n")), "encoding": "cl100k_base"}, "c:257: want a base64 token, a space and its rank"},
		{Args{"tokenizer": write("d", all("!!! 300\n")), "encoding": "cl100k_base"}, `d:257: token "!!!" is not base64`},
		{Args{"tokenizer": write("e", all("YWI= x\n")), "encoding": "cl100k_base"}, `e:257: rank "x" is not an integer`},
		{Args{"tokenizer": write("f", all("YWI= 3\n")), "encoding": "cl100k_base"}, "f:257: rank 3 given to two tokens (also on line 4)"},
		{Args{"tokenizer": write("g", "YQ== 0\n"), "encoding": "cl100k_base"}, "g: no token for byte 0x00"},
		{Args{"tokenizer": write("h", all("YWI= 9999999\n")), "encoding": "cl100k_base"}, "h:257: rank 9999999, but only 257 tokens: ranks must be dense"},
	}
	for _, c := range cases {
		if _, err := f(c.args); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokenize_tiktoken: ") {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
}

func TestSplitCL100K(t *testing.T) {
	cases := map[string][]string{
		"Hello world":  {"Hello", " world"},
		"1234567":      {"123", "456", "7"},
		"I'M you'Re":   {"I", "'M", " you", "'Re"},
		"$hello !! x":  {"$hello", " !!", " x"},
		"a\r\n\r\nb":   {"a", "\r\n\r\n", "b"},
		"x  \n  y":     {"x", "  \n", " ", " y"},
		"\tword":       {"\tword"},
		"a   ":         {"a", "   "},
		"foo()\n\tbar": {"foo", "()\n", "\tbar"},
		"\xff\xfeab":   {"\xff\xfe", "ab"},
		"\xffab":       {"\xffab"}, // an invalid byte prefixes a word as punctuation does
	}
	for in, want := range cases {
		var got []string
		splitCL100K([]byte(in), func(p []byte) { got = append(got, string(p)) })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// TestTiktokenMergeHeapMatchesScan: with a rank file, the two merge loops
// agree on long words (random letters: pieces of hundreds of bytes).
func TestTiktokenMergeHeapMatchesScan(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestBPEMergeHeapMatchesScan checks the same loops")
	}
	ranks := writeRankFile(t, cl100kTokenizer)
	data, _ := os.ReadFile(ranks)
	m, err := loadTiktoken(ranks, data, splitCL100K, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 200; n++ {
		w := make([]byte, 1+r.IntN(300))
		for i := range w {
			w[i] = "etaoinshrdlu"[r.IntN(12)]
		}
		a, b := make([]int32, len(w)), make([]int32, len(w))
		for i, x := range w {
			a[i], b[i] = m.byteID[x], m.byteID[x]
		}
		na, nb := m.mergeScan(a), m.mergeHeap(b)
		if !reflect.DeepEqual(a[:na], b[:nb]) {
			t.Fatalf("%q: scan %v, heap %v", w, a[:na], b[:nb])
		}
	}
}

// FuzzLoadTiktoken: any rank file is loaded or refused naming the file;
// one that loads encodes without panicking.
func FuzzLoadTiktoken(f *testing.F) {
	var b strings.Builder
	for i := 0; i < 256; i++ {
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{byte(i)}), i)
	}
	b.WriteString("aGU= 256\nbGw= 257\naGVsbA== 258\n")
	f.Add([]byte(b.String()), "hello 123")
	f.Add([]byte("YQ== 0\n\nYg== 1\r\n"), "ab")
	f.Add([]byte("YQ== 99999999999\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		m, err := loadTiktoken("fuzz.tiktoken", data, splitCL100K, map[string]int32{"<|x|>": 5})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.tiktoken") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		m.encode(nil, []byte(text))
	})
}
