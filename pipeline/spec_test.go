package pipeline

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
)

const yamlSpec = `
source:
  range: {start: 0, stop: 1000, split_size: 100}
seed: 5
ops:
  - map: {fn: test_add, args: {n: 3}, parallelism: 4}
  - filter: {fn: test_even}
  - shuffle: {buffer: 64, seed: 7}
  - map: {fn: test_vec}
  - bucket_by_sequence_length: {tensor: tokens, boundaries: [1, 3], batch_sizes: [8, 4, 2], pad_value: 0}
  - prefetch: {buffer: 8}
`

const jsonSpec = `{
  "source": {"range": {"start": 0, "stop": 1000, "split_size": 100, "step": 1}},
  "seed": 5,
  "ops": [
    {"map": {"fn": "test_add", "args": {"n": 3}, "parallelism": 4, "deterministic": true}},
    {"filter": {"fn": "test_even"}},
    {"shuffle": {"buffer": 64, "seed": 7}},
    {"map": {"fn": "test_vec"}},
    {"bucket_by_sequence_length": {"tensor": "tokens", "boundaries": [1, 3], "batch_sizes": [8, 4, 2]}},
    {"prefetch": {"buffer": 8}}
  ]
}`

func builderSpec() *Spec {
	s := NewSpec(Source{Range: &RangeSource{Stop: 1000, SplitSize: 100}}).
		Map("test_add", fn.Args{"n": 3}, 4).
		Filter("test_even", nil).
		Shuffle(64, 7).
		Map("test_vec", nil, 0).
		BucketBySequenceLength(BucketOp{Tensor: "tokens", Boundaries: []int64{1, 3}, BatchSizes: []int64{8, 4, 2}}).
		Prefetch(8)
	s.Seed = 5
	return s
}

// goldenFingerprint pins the canonical encoding: if it changes, every
// dataset registered by an older build changes identity. Change it only
// with a deliberate specVersion bump.
const goldenFingerprint = "917cdf008fda0067d6613423a6b56a72ebea229f4f2ce2b2b6884b344a75a47d"

func fingerprint(t *testing.T, s *Spec) string {
	t.Helper()
	fp, err := s.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestYAMLJSONBuilderAgree(t *testing.T) {
	y, err := ParseYAML([]byte(yamlSpec))
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseJSON([]byte(jsonSpec))
	if err != nil {
		t.Fatal(err)
	}
	fy, fj, fb := fingerprint(t, y), fingerprint(t, j), fingerprint(t, builderSpec())
	if fy != fj || fy != fb {
		t.Fatalf("fingerprints differ: yaml %s json %s builder %s", fy, fj, fb)
	}
	if fy != goldenFingerprint {
		t.Fatalf("fingerprint %s, golden %s", fy, goldenFingerprint)
	}
	// And they run identically.
	if a, b := encodeAll(t, run(t, y)), encodeAll(t, run(t, builderSpec())); string(a) != string(b) {
		t.Fatal("yaml and builder specs produce different data")
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	b, err := builderSpec().CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeCanonical(b)
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint(t, s) != fingerprint(t, builderSpec()) {
		t.Fatal("canonical round trip changed the fingerprint")
	}
	if _, err := DecodeCanonical(b[:len(b)-3]); err == nil {
		t.Fatal("truncated encoding decoded")
	}
}

func TestEveryFieldChangesFingerprint(t *testing.T) {
	base := fingerprint(t, builderSpec())
	seen := map[string]string{base: "base"}
	muts := map[string]func(s *Spec){
		"seed":             func(s *Spec) { s.Seed = 6 },
		"range.start":      func(s *Spec) { s.Source.Range.Start = 1 },
		"range.stop":       func(s *Spec) { s.Source.Range.Stop = 999 },
		"range.step":       func(s *Spec) { s.Source.Range.Step = 2 },
		"range.split_size": func(s *Spec) { s.Source.Range.SplitSize = 50 },
		"map.fn":           func(s *Spec) { s.Ops[3].Map.Fn = "test_double" },
		"map.args":         func(s *Spec) { s.Ops[0].Map.Args = fn.Args{"n": 4} },
		"map.args type":    func(s *Spec) { s.Ops[0].Map.Args = fn.Args{"n": 3.0} },
		"map.parallelism":  func(s *Spec) { s.Ops[0].Map.Parallelism = 2 },
		"map.deterministic": func(s *Spec) {
			f := false
			s.Ops[0].Map.Deterministic = &f
		},
		"map.seed":           func(s *Spec) { s.Ops[0].Map.Seed = 1 },
		"filter.seed":        func(s *Spec) { s.Ops[1].Filter.Seed = 1 },
		"shuffle.buffer":     func(s *Spec) { s.Ops[2].Shuffle.Buffer = 65 },
		"shuffle.seed":       func(s *Spec) { s.Ops[2].Shuffle.Seed = 8 },
		"bucket.tensor":      func(s *Spec) { s.Ops[4].BucketBySequenceLength.Tensor = "value" },
		"bucket.boundaries":  func(s *Spec) { s.Ops[4].BucketBySequenceLength.Boundaries[1] = 4 },
		"bucket.batch_sizes": func(s *Spec) { s.Ops[4].BucketBySequenceLength.BatchSizes[2] = 3 },
		"bucket.pad_value":   func(s *Spec) { s.Ops[4].BucketBySequenceLength.PadValue = -1 },
		"bucket.drop":        func(s *Spec) { s.Ops[4].BucketBySequenceLength.DropRemainder = true },
		"prefetch.buffer":    func(s *Spec) { s.Ops[5].Prefetch.Buffer = 9 },
		"op order":           func(s *Spec) { s.Ops[0], s.Ops[1] = s.Ops[1], s.Ops[0] },
		"extra op":           func(s *Spec) { s.Take(5) },
		"batch":              func(s *Spec) { s.Ops[5] = Op{Batch: &BatchOp{Size: 8}} },
	}
	for name, m := range muts {
		s := builderSpec()
		m(s)
		fp := fingerprint(t, s)
		if prev, dup := seen[fp]; dup {
			t.Errorf("%s: same fingerprint as %s", name, prev)
		}
		seen[fp] = name
	}
	// Defaults written or left out give the same fingerprint.
	s := builderSpec()
	s.Source.Range.Step = 1
	s.Ops[3].Map.Parallelism = 1
	if fingerprint(t, s) != base {
		t.Fatal("spelling out defaults changed the fingerprint")
	}
}

func TestValidationMessages(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"shuffle buffer", "source: {range: {stop: 5}}\nops:\n  - take: 1\n  - skip: 0\n  - shuffle: {buffer: 0}\n",
			[]string{"ops[2].shuffle.buffer: must be > 0"}},
		{"unknown op", "source: {range: {stop: 5}}\nops:\n  - shufle: {buffer: 3}\n",
			[]string{`ops[0]: unknown op "shufle" (known: autocache, batch, bucket_by_sequence_length, cost, filter, map, pack, padded_batch, prefetch, repeat, shuffle, skip, take)`}},
		{"unknown field", "source: {range: {stop: 5}}\nops:\n  - shuffle: {bufer: 3}\n",
			[]string{`ops[0].shuffle: unknown field "bufer" (known: buffer, seed)`}},
		{"unknown top-level key", "source: {range: {stop: 5}}\nopz: []\n", []string{`spec: unknown field "opz"`}},
		{"unknown source", "source: {rnge: {stop: 5}}\n", []string{`source: unknown source "rnge" (known: files, range, synthetic)`}},
		{"no source", "ops: []\n", []string{"source: want exactly one of [files range synthetic]"}},
		{"two sources", "source: {range: {stop: 5}, synthetic: {kind: text, count: 3}}\n", []string{"source: has [range synthetic]; want exactly one"}},
		{"unknown map fn", "source: {range: {stop: 5}}\nops:\n  - map: {fn: nope}\n", []string{`ops[0].map.fn: unknown map function "nope" (known: `, "test_double"}},
		{"unknown filter fn", "source: {range: {stop: 5}}\nops:\n  - filter: {fn: nope}\n", []string{`ops[0].filter.fn: unknown filter function "nope" (known: `, "test_even"}},
		{"bad fn arg", "source: {range: {stop: 5}}\nops:\n  - map: {fn: test_add, args: {m: 1}}\n", []string{`ops[0].map.args: unknown arg "m"`}},
		{"two ops in one entry", "source: {range: {stop: 5}}\nops:\n  - {take: 1, skip: 1}\n", []string{"ops[0]: has 2 ops (take, skip); want exactly one"}},
		{"wrong type", "source: {range: {stop: 5}}\nops:\n  - batch: {size: big}\n", []string{`ops[0].batch.size: want an integer, got the string "big"`}},
		{"bucket sizes", "source: {range: {stop: 5}}\nops:\n  - bucket_by_sequence_length: {tensor: t, boundaries: [3, 2], batch_sizes: [1, 1, 1]}\n",
			[]string{"ops[0].bucket_by_sequence_length: boundaries[1]: must be greater than boundaries[0]"}},
		{"repeat both", "source: {range: {stop: 5}}\nops:\n  - repeat: {count: 2, forever: true}\n", []string{"ops[0].repeat: set count or forever, not both"}},
		{"negative take", "source: {range: {stop: 5}}\nops:\n  - take: -1\n", []string{"ops[0].take.count: must be >= 0"}},
		{"cost", "source: {range: {stop: 5}}\nops:\n  - cost: {}\n", []string{"ops[0].cost: set exactly one of cpu_us and sleep_us"}},
		{"parallelism", "source: {range: {stop: 5}}\nops:\n  - map: {fn: test_double, parallelism: -2}\n", []string{"ops[0].map.parallelism: must be in [1, 1024], or auto"}},
		{"parallelism -1", "source: {range: {stop: 5}}\nops:\n  - map: {fn: test_double, parallelism: -1}\n", []string{"ops[0].map.parallelism: must be in [1, 1024], or auto (write auto"}},
		{"several problems", "source: {range: {stop: 5}}\nops:\n  - batch: {size: 0}\n  - prefetch: {buffer: -1}\n",
			[]string{"ops[0].batch.size: must be > 0; ops[1].prefetch.buffer: must be > 0"}},
		{"huge prefetch", "source: {range: {stop: 5}}\nops:\n  - prefetch: {buffer: 1000000000000}\n", []string{"ops[0].prefetch.buffer: must be <= 65536"}},
		{"huge bucket", "source: {range: {stop: 5}}\nops:\n  - bucket_by_sequence_length: {tensor: t, boundaries: [3], batch_sizes: [1, 100000000000]}\n",
			[]string{"ops[0].bucket_by_sequence_length.batch_sizes[1]: must be <= 16777216"}},
		{"files format", "source: {files: {paths: [a], format: orc}}\n", []string{"source.files: format:"}},
		{"encoding value", "source: {files: {paths: [a], format: lines, encoding: latin1}}\n", []string{`source.files: encoding: "latin1" is not utf8 or bytes`}},
		{"on_invalid value", "source: {files: {paths: [a], format: lines, on_invalid: drop}}\n", []string{`source.files: on_invalid: "drop" is not fail, skip or replace`}},
		{"on_invalid with bytes", "source: {files: {paths: [a], format: lines, encoding: bytes, on_invalid: replace}}\n",
			[]string{"source.files: on_invalid: replace needs encoding utf8; encoding bytes never checks lines"}},
		{"on_invalid fail with bytes", "source: {files: {paths: [a], format: lines, encoding: bytes, on_invalid: fail}}\n",
			[]string{"source.files: on_invalid: fail needs encoding utf8"}},
		{"encoding bytes on jsonl", "source: {files: {paths: [a], format: jsonl, encoding: bytes}}\n", []string{"source.files: encoding: jsonl is JSON text, which is UTF-8"}},
		{"encoding on csv", "source: {files: {paths: [a], format: csv, encoding: utf8}}\n", []string{"source.files: encoding: only lines and jsonl take an encoding, not csv"}},
		{"on_invalid on tfrecord", "source: {files: {paths: [a], format: tfrecord, on_invalid: fail}}\n", []string{"source.files: on_invalid: only lines and jsonl take on_invalid, not tfrecord"}},
		{"synthetic kind", "source: {synthetic: {kind: video, count: 3}}\n", []string{"source.synthetic: kind:"}},
		{"two documents", "source: {range: {stop: 5}}\n---\nsource: {range: {stop: 5}}\n", []string{"want one document"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseYAML([]byte(c.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestShorthandsAndNulls(t *testing.T) {
	a, err := ParseYAML([]byte("source: {range: {stop: 5}}\nops:\n  - take: 3\n  - repeat:\n  - skip: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := NewSpec(FromRange(0, 5, 1)).Take(3).RepeatForever().Skip(1)
	if fingerprint(t, a) != fingerprint(t, b) {
		t.Fatal("shorthand spec differs from builder spec")
	}
	if got := values(t, run(t, a.Take(4))); len(got) != 4 || got[0] != 1 {
		t.Fatalf("got %v", got)
	}
}

func TestLoadFileResolvesRelativePaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "a.txt"), []byte("x y\nz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte("source:\n  files: {paths: [\"data/*.txt\"], format: lines}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "data", "*.txt"); s.Source.Files.Paths[0] != want {
		t.Fatalf("path %q, want %q", s.Source.Files.Paths[0], want)
	}
	els := run(t, s)
	if len(els) != 2 {
		t.Fatalf("%d lines, want 2", len(els))
	}
	// A JSON file and a glob matching nothing.
	jsonPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(jsonPath, []byte(`{"source": {"files": {"paths": ["nothing/*.txt"], "format": "lines"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = LoadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Splits(s); err == nil || !strings.Contains(err.Error(), "nothing/*.txt") {
		t.Fatalf("glob matching nothing: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file loaded")
	}
}

const issueYAML = `
source:
  files: {paths: ["corpus/*.txt"], format: lines}     # lines | jsonl | csv | tfrecord | whole_file
ops:
  - map: {fn: tokenize_whitespace, args: {vocab_size: 32000}, parallelism: 4}
  - filter: {fn: length_between, args: {tensor: tokens, min: 1, max: 512}}
  - shuffle: {buffer: 4096, seed: 7}
  - bucket_by_sequence_length: {tensor: tokens, boundaries: [32, 64, 128, 256], batch_sizes: [128, 64, 32, 16, 8], pad_value: 0}
  - prefetch: {buffer: 8}
`

// goldenIssueFingerprint pins the fingerprint of the issue's example spec
// (paths as written, not resolved).
const goldenIssueFingerprint = "0f13a10de6c8373ea808545e764f4d5b0d92e9238b1abee176490e4b64a396c0"

func TestIssueExampleFingerprint(t *testing.T) {
	s, err := ParseYAML([]byte(issueYAML))
	if err != nil {
		t.Fatal(err)
	}
	b := NewSpec(FromFiles("lines", "corpus/*.txt")).
		Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 4).
		Filter("length_between", fn.Args{"tensor": "tokens", "min": 1, "max": 512}).
		Shuffle(4096, 7).
		BucketBySequenceLength(BucketOp{Tensor: "tokens", Boundaries: []int64{32, 64, 128, 256}, BatchSizes: []int64{128, 64, 32, 16, 8}}).
		Prefetch(8)
	if fs, fb := fingerprint(t, s), fingerprint(t, b); fs != goldenIssueFingerprint || fb != fs {
		t.Fatalf("yaml %s builder %s golden %s", fs, fb, goldenIssueFingerprint)
	}
	// The encoding and on_invalid keys came later: spelling out their
	// defaults leaves the golden encoding and fingerprint as they were.
	explicit := strings.Replace(issueYAML, "format: lines}", "format: lines, encoding: utf8, on_invalid: fail}", 1)
	e, err := ParseYAML([]byte(explicit))
	if err != nil {
		t.Fatal(err)
	}
	if fe := fingerprint(t, e); fe != goldenIssueFingerprint {
		t.Fatalf("explicit defaults: %s, golden %s", fe, goldenIssueFingerprint)
	}
	be, _ := b.CanonicalEncoding()
	ee, _ := e.CanonicalEncoding()
	if !bytes.Equal(be, ee) || bytes.Contains(ee, []byte("encoding")) || bytes.Contains(ee, []byte("on_invalid")) {
		t.Fatalf("canonical encoding changed or names the new keys: %x", ee)
	}
}

func TestSourceFieldsChangeFingerprint(t *testing.T) {
	files := func() *Spec {
		return &Spec{Source: Source{Files: &FilesSource{Paths: []string{"a/*.csv"}, Format: "csv",
			Fields: []Field{{Name: "x", DType: "int32"}}}}}
	}
	synth := func() *Spec {
		return &Spec{Source: Source{Synthetic: &SyntheticSource{Kind: "text", Count: 100}}}
	}
	cases := map[string]*Spec{"files": files(), "synthetic": synth()}
	add := func(name string, base func() *Spec, m func(s *Spec)) {
		s := base()
		m(s)
		cases[name] = s
	}
	add("paths", files, func(s *Spec) { s.Source.Files.Paths[0] = "b/*.csv" })
	add("format", files, func(s *Spec) { s.Source.Files.Format = "jsonl" })
	add("fields.name", files, func(s *Spec) { s.Source.Files.Fields[0].Name = "y" })
	add("fields.tensor", files, func(s *Spec) { s.Source.Files.Fields[0].Tensor = "y" })
	add("fields.dtype", files, func(s *Spec) { s.Source.Files.Fields[0].DType = "int64" })
	add("delimiter", files, func(s *Spec) { s.Source.Files.Delimiter = ";" })
	add("split_bytes", files, func(s *Spec) { s.Source.Files.SplitBytes = 1 << 20 })
	add("skip_corrupt", files, func(s *Spec) { s.Source.Files.SkipCorrupt = true })
	add("max_record_bytes", files, func(s *Spec) { s.Source.Files.MaxRecordBytes = 1 << 10 })
	lines := func() *Spec {
		return &Spec{Source: Source{Files: &FilesSource{Paths: []string{"a/*.txt"}, Format: "lines"}}}
	}
	jsonl := func() *Spec {
		return &Spec{Source: Source{Files: &FilesSource{Paths: []string{"a/*.txt"}, Format: "jsonl"}}}
	}
	parquet := func() *Spec {
		return &Spec{Source: Source{Files: &FilesSource{Paths: []string{"s3://b/a/*.parquet"}, Format: "parquet"}}}
	}
	cases["lines"], cases["jsonl"], cases["parquet"] = lines(), jsonl(), parquet()
	add("columns", parquet, func(s *Spec) { s.Source.Files.Columns = []string{"tokens"} })
	add("columns order", parquet, func(s *Spec) { s.Source.Files.Columns = []string{"tokens", "id"} })
	add("on_null", parquet, func(s *Spec) { s.Source.Files.OnNull = "skip" })
	add("object_store.store", parquet, func(s *Spec) { s.Source.Files.ObjectStore = &ObjectStoreOptions{Store: "minio"} })
	add("object_store.chunk_bytes", parquet, func(s *Spec) { s.Source.Files.ObjectStore = &ObjectStoreOptions{ChunkBytes: 1 << 20} })
	add("encoding", lines, func(s *Spec) { s.Source.Files.Encoding = "bytes" })
	add("on_invalid skip", lines, func(s *Spec) { s.Source.Files.OnInvalid = "skip" })
	add("on_invalid replace", lines, func(s *Spec) { s.Source.Files.OnInvalid = "replace" })
	add("jsonl on_invalid fail", jsonl, func(s *Spec) { s.Source.Files.OnInvalid = "fail" })
	add("jsonl on_invalid skip", jsonl, func(s *Spec) { s.Source.Files.OnInvalid = "skip" })
	add("kind", synth, func(s *Spec) { s.Source.Synthetic.Kind = "records" })
	add("count", synth, func(s *Spec) { s.Source.Synthetic.Count = 101 })
	add("seed", synth, func(s *Spec) { s.Source.Synthetic.Seed = 1 })
	add("split_size", synth, func(s *Spec) { s.Source.Synthetic.SplitSize = 10 })
	add("min_words", synth, func(s *Spec) { s.Source.Synthetic.MinWords = 2 })
	add("max_words", synth, func(s *Spec) { s.Source.Synthetic.MaxWords = 100 })
	add("mean_words", synth, func(s *Spec) { s.Source.Synthetic.MeanWords = 10 })
	add("tail_alpha", synth, func(s *Spec) { s.Source.Synthetic.TailAlpha = 2 })
	seen := map[string]string{}
	for name, s := range cases {
		fp := fingerprint(t, s)
		if prev, dup := seen[fp]; dup {
			t.Errorf("%s and %s have the same fingerprint", name, prev)
		}
		seen[fp] = name
	}
	// Defaults spelled out: same fingerprint.
	s := files()
	s.Source.Files.Delimiter = ","
	s.Source.Files.Fields[0].Tensor = "x"
	if fingerprint(t, s) != fingerprint(t, files()) {
		t.Fatal("explicit defaults changed the files fingerprint")
	}
	l := lines()
	l.Source.Files.Encoding, l.Source.Files.OnInvalid = "utf8", "fail"
	if fingerprint(t, l) != fingerprint(t, lines()) {
		t.Fatal("explicit encoding: utf8, on_invalid: fail changed the lines fingerprint")
	}
	j := jsonl()
	j.Source.Files.Encoding = "utf8"
	if fingerprint(t, j) != fingerprint(t, jsonl()) {
		t.Fatal("explicit encoding: utf8 changed the jsonl fingerprint")
	}
	y := synth()
	y.Source.Synthetic.MeanWords = 32
	y.Source.Synthetic.SplitSize = DefaultSplitSize
	if fingerprint(t, y) != fingerprint(t, synth()) {
		t.Fatal("explicit defaults changed the synthetic fingerprint")
	}
}

// A YAML syntax error says so once, with the parser's line, not
// "yaml: yaml: …".
func TestYAMLSyntaxError(t *testing.T) {
	for _, doc := range []string{"source: [range\nops: x\n", "a: 1\n---\nb: 2\n"} {
		_, err := ParseYAML([]byte(doc))
		if err == nil || !strings.HasPrefix(err.Error(), "invalid YAML: ") || strings.Contains(err.Error(), "yaml: yaml") {
			t.Errorf("%q: err = %v", doc, err)
		}
	}
	if _, err := ParseYAML([]byte("source: [range\n")); err == nil || !strings.Contains(err.Error(), "line") {
		t.Errorf("syntax error without a line: %v", err)
	}
}

// TestTokenizeBPESpecFile: a spec's relative tokenizer path is relative to
// the spec file, and the tokens are GPT-2's.
func TestTokenizeBPESpecFile(t *testing.T) {
	dir := t.TempDir()
	tok, err := os.ReadFile("fn/testdata/bpe/gpt2-tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"gpt2.json.gz": tok, "a.txt": []byte("Hello world\n<|endoftext|>It's 2026\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specPath := filepath.Join(dir, "spec.yaml")
	spec := "source:\n  files: {paths: [a.txt], format: lines}\nops:\n  - map: {fn: tokenize_bpe, args: {tokenizer: gpt2.json.gz}}\n"
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int32
	for _, e := range run(t, s) {
		tt, _ := e.Get("tokens")
		v, _ := tt.Int32s()
		got = append(got, append([]int32{}, v...))
	}
	// js-tiktoken r50k_base: "Hello world", "<|endoftext|>It's 2026".
	want := [][]int32{{15496, 995}, {50256, 1026, 338, 1160, 2075}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestTokenizeBPEParallel: workers of a parallel map share one loaded
// tokenizer (and its word cache) and give what one worker gives.
func TestTokenizeBPEParallel(t *testing.T) {
	dir := t.TempDir()
	var text strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&text, "line %d: the quick brown fox's %d jumps over the lazy dog — naïve café 中文 %x\n", i, i*i, i)
	}
	p := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(p, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, _ := filepath.Abs("fn/testdata/bpe/gpt2-tokenizer.json.gz")
	spec := func(par int) *Spec {
		return NewSpec(Source{Files: &FilesSource{Paths: []string{p}, Format: "lines"}}).
			Then(Op{Map: &MapOp{Fn: "tokenize_bpe", Args: map[string]any{"tokenizer": tok}, Parallelism: par}})
	}
	one, four := run(t, spec(1)), run(t, spec(4))
	if len(one) != 2000 || !reflect.DeepEqual(one, four) {
		t.Fatalf("parallelism 4 differs from 1 (%d vs %d elements)", len(four), len(one))
	}
}

// An s3:// path in a spec file is not resolved against the file's
// directory, and object_store, columns and on_null decode.
func TestLoadFileObjectStore(t *testing.T) {
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yaml")
	spec := `source:
  files:
    paths: ["s3://corpus/tok/shard-*.parquet", "https://example.com/x.parquet", "local/*.parquet"]
    format: parquet
    columns: [tokens, id]
    on_null: skip
    object_store: {store: minio, max_concurrent_reads: 4, chunk_bytes: 1048576, read_ahead_chunks: 3, max_retries: -1}
`
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Source.Files
	want := []string{"s3://corpus/tok/shard-*.parquet", "https://example.com/x.parquet", filepath.Join(dir, "local", "*.parquet")}
	if !reflect.DeepEqual(f.Paths, want) {
		t.Fatalf("paths %q, want %q", f.Paths, want)
	}
	wantStore := ObjectStoreOptions{Store: "minio", MaxConcurrentReads: 4, ChunkBytes: 1 << 20, ReadAheadChunks: 3, MaxRetries: -1}
	if f.ObjectStore == nil || *f.ObjectStore != wantStore || !reflect.DeepEqual(f.Columns, []string{"tokens", "id"}) || f.OnNull != "skip" {
		t.Fatalf("decoded %+v, object_store %+v", f, f.ObjectStore)
	}
	o, err := filesOptions(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Store.Store != "minio" || o.Store.Endpoint != "" || o.Store.MaxRetries != -1 || o.Store.ChunkBytes != 1<<20 {
		t.Fatalf("objstore config %+v", o.Store)
	}
	// A tokenizer in object storage is not resolved against the spec's
	// directory either (loading the spec would fetch it, to check it).
	ts := NewSpec(Source{Range: &RangeSource{Stop: 1}}).Map("tokenize_bpe", fn.Args{"tokenizer": "s3://models/gpt2/tokenizer.json"}, 0)
	ts.ResolvePaths(dir)
	if tok := ts.Ops[0].Map.Args["tokenizer"]; tok != "s3://models/gpt2/tokenizer.json" {
		t.Fatalf("tokenizer %q: an object URL resolved as a local path", tok)
	}
	bad := strings.Replace(spec, "on_null: skip", "on_null: maybe", 1)
	if err := os.WriteFile(specPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(specPath); err == nil || !strings.Contains(err.Error(), "on_null") {
		t.Fatalf("bad on_null: %v", err)
	}
}

// TestSpecNamesNoEndpoint (issue 37): where an object store is and how to
// reach it is the node operator's, not the spec's: a spec giving an
// endpoint, a region or path_style decodes, and is refused by validation
// with a message saying how to configure a named store.
func TestSpecNamesNoEndpoint(t *testing.T) {
	for _, o := range []string{`endpoint: "http://attacker.example:9000"`, "region: eu-west-1", "path_style: true"} {
		spec := "source:\n  files: {paths: [\"s3://b/k.parquet\"], format: parquet, object_store: {" + o + "}}\n"
		s, err := ParseYAML([]byte(spec))
		if err == nil {
			err = s.Validate()
		}
		key, _, _ := strings.Cut(o, ":")
		if err == nil || !strings.Contains(err.Error(), "object_store."+key) || !strings.Contains(err.Error(), "--object-store NAME=endpoint=") ||
			!strings.Contains(err.Error(), "s3://NAME/bucket/key") {
			t.Errorf("%s: %v, want a refusal saying how to configure a named store", o, err)
		}
	}
}
