package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

func TestLines(t *testing.T) {
	cases := []struct {
		content string
		want    []string
	}{
		{"", nil},
		{"a\nb\nc\n", []string{"a", "b", "c"}},
		{"a\nb", []string{"a", "b"}},
		{"a\r\n\r\nb\r\n", []string{"a", "", "b"}},
		{"\n\n", []string{"", ""}},
		{"héllo wörld\n", []string{"héllo wörld"}},
	}
	for i, c := range cases {
		dir := t.TempDir()
		p := writeFile(t, dir, "f.txt", c.content)
		els, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatLines})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got := texts(t, els, "text"); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("case %d: got %q, want %q", i, got, c.want)
		}
	}
}

func TestLinesErrors(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "bad.txt", "ok\nfine\nbad \xff byte\n")
	_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatLines})
	if want := p + ":3: invalid UTF-8 at byte 4 of the line (file offset 12); on_invalid: skip or replace reads past such lines, encoding: bytes reads them as they are"; err == nil || err.Error() != want || !errors.Is(err, ErrBadRecord) {
		t.Fatalf("got %v, want %q", err, want)
	}
	long := writeFile(t, dir, "long.txt", "short\n"+strings.Repeat("x", 200000)+"\nafter\n")
	_, err = readAllFiles(t, FilesOptions{Paths: []string{long}, Format: FormatLines, MaxRecordBytes: 100000})
	if !errors.Is(err, ErrRecordTooLarge) || !strings.HasPrefix(err.Error(), long+":2:") {
		t.Fatalf("got %v", err)
	}
	// A long line under the limit is read whole.
	els, err := readAllFiles(t, FilesOptions{Paths: []string{long}, Format: FormatLines})
	if err != nil || len(els) != 3 || len(texts(t, els, "text")[1]) != 200000 {
		t.Fatalf("long line: %v, %d elements", err, len(els))
	}
}

func TestGlobs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.txt", "b1\nb2\n")
	writeFile(t, dir, "a.txt", "a1\n")
	writeFile(t, dir, "c.log", "c\n")
	os.Mkdir(filepath.Join(dir, "sub.txt"), 0o755)
	o := FilesOptions{Paths: []string{filepath.Join(dir, "*.txt"), filepath.Join(dir, "a.txt")}, Format: FormatLines}
	splits, err := FileSplits(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 2 || filepath.Base(splits[0].Path) != "a.txt" || filepath.Base(splits[1].Path) != "b.txt" || splits[1].ID != 1 {
		t.Fatalf("splits %+v", splits)
	}
	els, _ := readAllFiles(t, o)
	if got := texts(t, els, "text"); !reflect.DeepEqual(got, []string{"a1", "b1", "b2"}) {
		t.Fatalf("got %q", got)
	}
	pat := filepath.Join(dir, "*.csv")
	_, err = FileSplits(FilesOptions{Paths: []string{filepath.Join(dir, "a.txt"), pat}, Format: FormatLines})
	if !errors.Is(err, ErrNoMatch) || !strings.Contains(err.Error(), "paths[1]") || !strings.Contains(err.Error(), pat) {
		t.Fatalf("got %v", err)
	}
}

func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "gone.txt", "x\n")
	o := FilesOptions{Paths: []string{p}, Format: FormatLines}
	splits, err := FileSplits(o)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	if _, err := OpenFiles(context.Background(), o, splits[0]); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("got %v, want an error naming %s", err, p)
	}
	if os.Geteuid() != 0 { // root reads anything
		q := writeFile(t, dir, "secret.txt", "x\n")
		os.Chmod(q, 0)
		_, err := readAllFiles(t, FilesOptions{Paths: []string{q}, Format: FormatLines})
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), q) {
			t.Fatalf("got %v", err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		o    FilesOptions
		want string
	}{
		{FilesOptions{Format: FormatLines}, "paths:"},
		{FilesOptions{Paths: []string{"x"}, Format: "orc"}, "format:"},
		{FilesOptions{Paths: []string{"[x"}, Format: FormatLines}, "paths[0]: bad pattern"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatLines, Fields: []Field{{Name: "a"}}}, "fields:"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatJSONL, Fields: []Field{{Name: ""}}}, "fields[0].name"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatJSONL, Fields: []Field{{Name: "a"}, {Name: "b", Tensor: "a"}}}, "fields[1].tensor"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatCSV, Delimiter: '"'}, "delimiter:"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatLines, SplitBytes: -1}, "split_bytes:"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatLines, Encoding: "latin1"}, `encoding: "latin1" is not utf8 or bytes`},
		{FilesOptions{Paths: []string{"x"}, Format: FormatLines, OnInvalid: "ignore"}, `on_invalid: "ignore" is not fail, skip or replace`},
		{FilesOptions{Paths: []string{"x"}, Format: FormatLines, Encoding: EncodingBytes, OnInvalid: OnInvalidSkip}, "on_invalid: skip needs encoding utf8"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatLines, Encoding: EncodingBytes, OnInvalid: OnInvalidFail}, "on_invalid: fail needs encoding utf8"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatJSONL, Encoding: EncodingBytes}, "encoding: jsonl is JSON text, which is UTF-8"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatCSV, Encoding: EncodingUTF8}, "encoding: only lines and jsonl take an encoding, not csv"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatTFRecord, OnInvalid: OnInvalidSkip}, "on_invalid: only lines and jsonl take on_invalid, not tfrecord"},
		{FilesOptions{Paths: []string{"x"}, Format: FormatWholeFile, OnInvalid: OnInvalidFail}, "on_invalid: only lines and jsonl take on_invalid, not whole_file"},
	}
	for _, c := range cases {
		err := c.o.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want prefix %q", c.o, err, c.want)
		}
	}
}

func TestJSONL(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", `{"text": "hello", "label": 3, "score": 0.5, "ids": [1, 2, 3], "tags": ["x", "y"], "ok": true}`+"\n\n"+
		`{"text": "wörld", "label": -1, "score": 2, "ids": [], "tags": [], "ok": false, "extra": {"a": 1}}`+"\n")
	o := FilesOptions{Paths: []string{p}, Format: FormatJSONL, Fields: []Field{
		{Name: "text"}, {Name: "label", DType: tensor.Int64}, {Name: "score", Tensor: "s", DType: tensor.Float32},
		{Name: "ids", DType: tensor.Int32}, {Name: "tags"}, {Name: "ok", DType: tensor.Bool},
	}}
	els, err := readAllFiles(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(els) != 2 {
		t.Fatalf("%d elements", len(els))
	}
	if got := texts(t, els, "text"); !reflect.DeepEqual(got, []string{"hello", "wörld"}) {
		t.Fatalf("text %q", got)
	}
	if int64Of(t, els[1], "label") != -1 {
		t.Fatal("label")
	}
	s, _ := els[0].Get("s")
	if f, _ := s.Float32s(); len(f) != 1 || f[0] != 0.5 {
		t.Fatalf("score %v", f)
	}
	ids, _ := els[0].Get("ids")
	if v, _ := ids.Int32s(); !reflect.DeepEqual(v, []int32{1, 2, 3}) || !reflect.DeepEqual(ids.Shape, []int64{3}) {
		t.Fatalf("ids %v %v", v, ids.Shape)
	}
	tags, _ := els[0].Get("tags")
	if tags.NumValues() != 2 || string(tags.Entry(1)) != "y" {
		t.Fatalf("tags %+v", tags)
	}
	if ok, _ := els[1].Get("ok"); ok.Data[0] != 0 {
		t.Fatal("ok")
	}

	// No fields: the raw object.
	els, err = readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatJSONL})
	if err != nil || len(els) != 2 || !strings.HasPrefix(texts(t, els, "json")[0], `{"text": "hello"`) {
		t.Fatalf("raw: %v %d", err, len(els))
	}
}

func TestJSONLErrors(t *testing.T) {
	cases := []struct {
		content string
		fields  []Field
		want    string // after "path:"
	}{
		{`{"a": 1}` + "\n" + `{"a": 2}` + "\n" + `{"a": 3` + "\n", []Field{{Name: "a", DType: tensor.Int64}}, "3: invalid JSON: "},
		{`{"a": 1}` + "\n" + `[1]` + "\n", nil, "2: invalid JSON: want an object"},
		{`{"a": 1}` + "\n" + `{"b": 1}` + "\n", []Field{{Name: "a"}}, `2: field "a" missing`},
		{`{"a": "x"}` + "\n", []Field{{Name: "a", DType: tensor.Int64}}, `1: field "a": want a number for int64`},
		{`{"a": 1.5}` + "\n", []Field{{Name: "a", DType: tensor.Int64}}, `1: field "a": cannot parse "1.5" as int64`},
		{`{"a": 300}` + "\n", []Field{{Name: "a", DType: tensor.Uint8}}, `1: field "a": cannot parse "300" as uint8`},
		{`{"a": null}` + "\n", []Field{{Name: "a"}}, `1: field "a": is null`},
		{"\n\n" + `{"a": [1, "x"]}` + "\n", []Field{{Name: "a", DType: tensor.Float32}}, `3: field "a": [1]: want a number`},
		{`null` + "\n", []Field{{Name: "a"}}, `1: invalid JSON: want an object, got null`},
	}
	for i, c := range cases {
		p := writeFile(t, t.TempDir(), "c.jsonl", c.content)
		_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatJSONL, Fields: c.fields})
		if err == nil || !strings.HasPrefix(err.Error(), p+":"+c.want) || !errors.Is(err, ErrBadRecord) {
			t.Errorf("case %d: got %v, want prefix %q", i, err, p+":"+c.want)
		}
	}
}

func TestCSV(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "d.csv", "name,age,score,active\n"+
		"alice,30,1.5,true\n"+
		"\"bob, jr\",41, -2 ,false\n"+
		"\"multi\nline\",5,0,1\n")
	o := FilesOptions{Paths: []string{p}, Format: FormatCSV, Fields: []Field{
		{Name: "name"}, {Name: "age", DType: tensor.Int32}, {Name: "score", DType: tensor.Float64}, {Name: "active", Tensor: "on", DType: tensor.Bool},
	}}
	els, err := readAllFiles(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, els, "name"); !reflect.DeepEqual(got, []string{"alice", "bob, jr", "multi\nline"}) {
		t.Fatalf("names %q", got)
	}
	if int64Of(t, els[1], "age") != 41 || int64Of(t, els[2], "on") != 1 {
		t.Fatal("age/on")
	}
	sc, _ := els[1].Get("score")
	if f, _ := sc.Float64s(); f[0] != -2 {
		t.Fatalf("score %v", f)
	}
	// All columns as bytes; a different delimiter.
	q := writeFile(t, dir, "e.tsv", "x\ty\n1\t2\n3\t4\n")
	els, err = readAllFiles(t, FilesOptions{Paths: []string{q}, Format: FormatCSV, Delimiter: '\t'})
	if err != nil || !reflect.DeepEqual(texts(t, els, "y"), []string{"2", "4"}) {
		t.Fatalf("tsv: %v", err)
	}
	// Header only, and an empty file.
	for _, content := range []string{"a,b\n", ""} {
		r := writeFile(t, t.TempDir(), "h.csv", content)
		els, err := readAllFiles(t, FilesOptions{Paths: []string{r}, Format: FormatCSV})
		if err != nil || len(els) != 0 {
			t.Fatalf("%q: %v %d", content, err, len(els))
		}
	}
}

func TestCSVErrors(t *testing.T) {
	cases := []struct {
		content string
		fields  []Field
		want    string
	}{
		{"a,b\n1,2\n3,x\n", []Field{{Name: "b", DType: tensor.Int64}}, `3: column "b": cannot parse "x" as int64`},
		{"a,b\n1,2\n\"q\nq\",2\n3,2.5\n", []Field{{Name: "b", DType: tensor.Int64}}, `5: column "b": cannot parse "2.5" as int64`},
		{"a,b\n1,2\n3\n", nil, `3: wrong number of fields`},
		{"a,b\n1,2\n", []Field{{Name: "c"}}, `1: column "c" not in header (columns: a, b)`},
		{"a,b\n1,\"2\n", nil, `2: extraneous or missing " in quoted-field`},
		{"a,a\n1,2\n", nil, `1: column "a" appears twice`},
	}
	for i, c := range cases {
		p := writeFile(t, t.TempDir(), "c.csv", c.content)
		_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatCSV, Fields: c.fields})
		if err == nil || !strings.HasPrefix(err.Error(), p+":"+c.want) {
			t.Errorf("case %d: got %v, want prefix %q", i, err, p+":"+c.want)
		}
	}
}

func TestWholeFile(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.bin", "\x00\x01binary")
	b := writeFile(t, dir, "b.bin", "")
	els, err := readAllFiles(t, FilesOptions{Paths: []string{filepath.Join(dir, "*.bin")}, Format: FormatWholeFile, SplitBytes: 1})
	if err != nil || len(els) != 2 {
		t.Fatalf("%v %d", err, len(els))
	}
	if got := texts(t, els, "path"); !reflect.DeepEqual(got, []string{a, b}) {
		t.Fatalf("paths %q", got)
	}
	if got := texts(t, els, "data"); got[0] != "\x00\x01binary" || got[1] != "" {
		t.Fatalf("data %q", got)
	}
	_, err = readAllFiles(t, FilesOptions{Paths: []string{a}, Format: FormatWholeFile, MaxRecordBytes: 3})
	if !errors.Is(err, ErrRecordTooLarge) || !strings.HasPrefix(err.Error(), a+": ") {
		t.Fatalf("got %v", err)
	}
}

// TestSplitsCoverEveryRecordOnce is the property test: for random split
// sizes, the union of all splits' records is the whole file's records, in
// order, each exactly once.
func TestSplitsCoverEveryRecordOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	var lines, jsonl, csvb strings.Builder
	csvb.WriteString("id,text\n")
	var want []string
	for i := 0; i < 500; i++ {
		s := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(300))
		if r.IntN(10) == 0 {
			s = "" // empty lines are records too
		}
		want = append(want, s)
		fmt.Fprintf(&lines, "%s\n", s)
		fmt.Fprintf(&jsonl, "{\"text\": %q}\n", s)
		if r.IntN(3) == 0 {
			fmt.Fprintf(&csvb, "%d,\"%s\n\"\"q\"\"\"\n", i, s) // quoted newline and quotes
		} else {
			fmt.Fprintf(&csvb, "%d,%s\n", i, s)
		}
	}
	pl := writeFile(t, dir, "l.txt", lines.String())
	pj := writeFile(t, dir, "j.jsonl", jsonl.String())
	pc := writeFile(t, dir, "c.csv", csvb.String())
	for trial := 0; trial < 25; trial++ {
		sb := 1 + r.Int64N(20000)
		for _, o := range []FilesOptions{
			{Paths: []string{pl}, Format: FormatLines, SplitBytes: sb},
			{Paths: []string{pj}, Format: FormatJSONL, SplitBytes: sb, Fields: []Field{{Name: "text"}}},
			{Paths: []string{pc}, Format: FormatCSV, SplitBytes: sb},
		} {
			els, err := readAllFiles(t, o)
			if err != nil {
				t.Fatal(err)
			}
			got := texts(t, els, "text")
			if o.Format == FormatCSV {
				for i := range got {
					got[i] = strings.TrimSuffix(got[i], "\n\"q\"")
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s split_bytes %d: %d records, want %d", o.Format, sb, len(got), len(want))
			}
		}
		// Lines also accept arbitrary byte ranges: a range starting inside
		// a line skips to the next one.
		st, _ := os.Stat(pl)
		var got []string
		for start := int64(0); start < st.Size(); start += sb {
			it, err := OpenFiles(context.Background(), FilesOptions{Paths: []string{pl}, Format: FormatLines}, Split{Path: pl, Start: start, End: min(start+sb, st.Size())})
			if err != nil {
				t.Fatal(err)
			}
			els, err := drain(t, it)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, texts(t, els, "text")...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("arbitrary ranges of %d bytes: %d records, want %d", sb, len(got), len(want))
		}
	}
	splits, _ := FileSplits(FilesOptions{Paths: []string{pl}, Format: FormatLines, SplitBytes: 4096})
	again, _ := FileSplits(FilesOptions{Paths: []string{pl}, Format: FormatLines, SplitBytes: 4096})
	if len(splits) < 5 || !reflect.DeepEqual(splits, again) {
		t.Fatalf("splits not deterministic or too few: %d", len(splits))
	}
}

func TestErrorLineNumbersInLaterSplits(t *testing.T) {
	var b bytes.Buffer
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "{\"n\": %d}\n", i)
	}
	b.WriteString("{broken\n")
	p := writeFile(t, t.TempDir(), "x.jsonl", b.String())
	_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatJSONL, SplitBytes: 1000, Fields: []Field{{Name: "n", DType: tensor.Int64}}})
	if err == nil || !strings.HasPrefix(err.Error(), p+":1001: invalid JSON") {
		t.Fatalf("got %v", err)
	}
	var c bytes.Buffer
	c.WriteString("n\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&c, "%d\n", i)
	}
	c.WriteString("oops\n")
	q := writeFile(t, t.TempDir(), "x.csv", c.String())
	_, err = readAllFiles(t, FilesOptions{Paths: []string{q}, Format: FormatCSV, SplitBytes: 700, Fields: []Field{{Name: "n", DType: tensor.Int64}}})
	if err == nil || !strings.HasPrefix(err.Error(), q+":1002: column \"n\"") {
		t.Fatalf("got %v", err)
	}
}
