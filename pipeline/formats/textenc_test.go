package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// readCounting reads every split of o and returns the texts, the summed
// Skipped and Replaced counts of the iterators, and the first error.
func readCounting(t *testing.T, o FilesOptions, tensorName string) (texts []string, skipped, replaced int64, err error) {
	t.Helper()
	splits, err := FileSplits(o)
	if err != nil {
		return nil, 0, 0, err
	}
	for _, s := range splits {
		it, err := OpenFiles(context.Background(), o, s)
		if err != nil {
			return texts, skipped, replaced, err
		}
		for {
			e, nerr := it.Next(context.Background())
			if errors.Is(nerr, io.EOF) {
				break
			}
			if nerr != nil {
				err = nerr
				break
			}
			tt, ok := e.Get(tensorName)
			if !ok {
				t.Fatalf("no tensor %q", tensorName)
			}
			texts = append(texts, string(tt.Entry(0)))
		}
		skipped += it.(interface{ Skipped() int64 }).Skipped()
		replaced += it.(interface{ Replaced() int64 }).Replaced()
		it.Close()
		if err != nil {
			return texts, skipped, replaced, err
		}
	}
	return texts, skipped, replaced, nil
}

// TestLinesEncoding runs every encoding / on_invalid mode over files with
// each kind of bad line.
func TestLinesEncoding(t *testing.T) {
	const rep = "\uFFFD"
	type want struct {
		texts             []string
		skipped, replaced int64
		err               string // substring of the error; "" for none
	}
	files := []struct {
		name, content string
		// per mode: "" (default, = fail), fail, skip, replace, bytes
		modes map[string]want
	}{
		{"valid", "a\nhé\n\nlast", map[string]want{
			"":        {texts: []string{"a", "hé", "", "last"}},
			"fail":    {texts: []string{"a", "hé", "", "last"}},
			"skip":    {texts: []string{"a", "hé", "", "last"}},
			"replace": {texts: []string{"a", "hé", "", "last"}},
			"bytes":   {texts: []string{"a", "hé", "", "last"}},
		}},
		{"mid-line", "ok\nbad \xff byte\nfine\n", map[string]want{
			"":        {texts: []string{"ok"}, err: ":2: invalid UTF-8 at byte 4 of the line (file offset 7)"},
			"fail":    {texts: []string{"ok"}, err: ":2: invalid UTF-8 at byte 4 of the line (file offset 7)"},
			"skip":    {texts: []string{"ok", "fine"}, skipped: 1},
			"replace": {texts: []string{"ok", "bad " + rep + " byte", "fine"}, replaced: 1},
			"bytes":   {texts: []string{"ok", "bad \xff byte", "fine"}},
		}},
		{"lone continuation", "ok\n\x80\nx\x80\x80y\n", map[string]want{
			"fail":    {texts: []string{"ok"}, err: ":2: invalid UTF-8 at byte 0 of the line (file offset 3)"},
			"skip":    {texts: []string{"ok"}, skipped: 2},
			"replace": {texts: []string{"ok", rep, "x" + rep + rep + "y"}, replaced: 2},
			"bytes":   {texts: []string{"ok", "\x80", "x\x80\x80y"}},
		}},
		{"invalid last line without newline", "ok\nend \xe2\x82", map[string]want{
			"fail":    {texts: []string{"ok"}, err: ":2: invalid UTF-8 at byte 4 of the line (file offset 7)"},
			"skip":    {texts: []string{"ok"}, skipped: 1},
			"replace": {texts: []string{"ok", "end " + rep}, replaced: 1}, // a truncated sequence is one U+FFFD
			"bytes":   {texts: []string{"ok", "end \xe2\x82"}},
		}},
		{"crlf", "a\r\nb\xfe\r\n\xf0\x9f\x98\r\nc\r\n", map[string]want{
			"fail":    {texts: []string{"a"}, err: ":2: invalid UTF-8 at byte 1 of the line (file offset 4)"},
			"skip":    {texts: []string{"a", "c"}, skipped: 2},
			"replace": {texts: []string{"a", "b" + rep, rep, "c"}, replaced: 2},
			"bytes":   {texts: []string{"a", "b\xfe", "\xf0\x9f\x98", "c"}},
		}},
	}
	for _, f := range files {
		p := writeFile(t, t.TempDir(), "f.txt", f.content)
		for mode, w := range f.modes {
			t.Run(f.name+"/"+mode, func(t *testing.T) {
				o := FilesOptions{Paths: []string{p}, Format: FormatLines, OnInvalid: mode}
				if mode == "bytes" {
					o = FilesOptions{Paths: []string{p}, Format: FormatLines, Encoding: EncodingBytes}
				}
				got, skipped, replaced, err := readCounting(t, o, "text")
				if w.err == "" && err != nil || w.err != "" && (err == nil || !strings.Contains(err.Error(), p+w.err) || !errors.Is(err, ErrBadRecord)) {
					t.Fatalf("err %v, want %q", err, w.err)
				}
				if !reflect.DeepEqual(got, w.texts) && !(len(got) == 0 && len(w.texts) == 0) {
					t.Fatalf("texts %q, want %q", got, w.texts)
				}
				if skipped != w.skipped || replaced != w.replaced {
					t.Fatalf("skipped %d replaced %d, want %d %d", skipped, replaced, w.skipped, w.replaced)
				}
			})
		}
	}
}

// TestReplaceInvalid pins the replacement to Unicode's recommended
// practice (maximal subparts), as Python's errors="replace" does.
func TestReplaceInvalid(t *testing.T) {
	const rep = "\uFFFD"
	cases := []struct{ in, want string }{
		{"", ""},
		{"héllo €𝄞", "héllo €𝄞"},
		{"\xed\xa0\x80", rep + rep + rep},           // surrogate: ED cannot be followed by A0
		{"\xc0\xaf", rep + rep},                     // overlong
		{"\xe0\x80\xaf", rep + rep + rep},           // overlong
		{"\xf0\x9f\x98", rep},                       // truncated 4-byte sequence
		{"\xe2\x82", rep},                           // truncated 3-byte sequence
		{"\xf4\x90\x80\x80", rep + rep + rep + rep}, // above U+10FFFF
		{"a\x80\x80b", "a" + rep + rep + "b"},
		{"\xf0\x9f\x98x\xe2\x82\xac", rep + "x€"},
		{"\xf5", rep},
		{"\xff\xfe", rep + rep},
	}
	for _, c := range cases {
		got := appendReplacingInvalid(nil, []byte(c.in))
		if string(got) != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
		if n := replacedLen([]byte(c.in)); n != len(got) {
			t.Errorf("%q: replacedLen %d, result %d bytes", c.in, n, len(got))
		}
		if at := invalidUTF8At([]byte(c.in)); (at >= 0) == utf8.ValidString(c.in) {
			t.Errorf("%q: invalidUTF8At %d, valid %v", c.in, at, utf8.ValidString(c.in))
		}
	}
}

// Splitting a file into byte ranges changes neither what skip and replace
// yield nor their counts: a line is read, checked and counted by the
// split its first byte falls in.
func TestInvalidUTF8CountsAcrossSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bad := []string{"\xff", "\x80", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80"}
	var b strings.Builder
	nBad := 0
	for i := 0; i < 400; i++ {
		line := strings.Repeat("w", r.IntN(80))
		if r.IntN(4) == 0 {
			k := r.IntN(len(line) + 1)
			line = line[:k] + bad[r.IntN(len(bad))] + line[k:]
			nBad++
		}
		end := "\n"
		if r.IntN(3) == 0 {
			end = "\r\n"
		}
		b.WriteString(line + end)
	}
	b.WriteString("tail \xff") // the last line, without a newline, is bad too
	nBad++
	p := writeFile(t, t.TempDir(), "s.txt", b.String())
	for _, mode := range []string{OnInvalidSkip, OnInvalidReplace} {
		whole, ws, wr, err := readCounting(t, FilesOptions{Paths: []string{p}, Format: FormatLines, OnInvalid: mode}, "text")
		if err != nil {
			t.Fatal(err)
		}
		if ws+wr != int64(nBad) {
			t.Fatalf("%s: counted %d+%d, want %d", mode, ws, wr, nBad)
		}
		for _, sb := range []int64{1, 7, 100, 1000, 1 + r.Int64N(5000)} {
			got, s, rp, err := readCounting(t, FilesOptions{Paths: []string{p}, Format: FormatLines, OnInvalid: mode, SplitBytes: sb}, "text")
			if err != nil {
				t.Fatal(err)
			}
			if s != ws || rp != wr || !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s split_bytes %d: %d lines, skipped %d replaced %d; whole file %d, %d, %d", mode, sb, len(got), s, rp, len(whole), ws, wr)
			}
		}
	}
}

// jsonl: unset on_invalid keeps the old lenient reading; fail, skip and
// replace check each line before it is parsed.
func TestJSONLOnInvalid(t *testing.T) {
	content := `{"t": "ok"}` + "\n" + "{\"t\": \"b\xffd\"}\n" + "\n" + `{"t": "end"}`
	p := writeFile(t, t.TempDir(), "x.jsonl", content)
	fields := []Field{{Name: "t"}}
	cases := []struct {
		mode              string
		fields            []Field
		texts             []string
		skipped, replaced int64
		err               string
	}{
		{"", fields, []string{"ok", "b\uFFFDd", "end"}, 0, 0, ""}, // the JSON decoder replaces, uncounted
		{"", nil, []string{`{"t": "ok"}`, "{\"t\": \"b\xffd\"}", `{"t": "end"}`}, 0, 0, ""},
		{OnInvalidFail, fields, []string{"ok"}, 0, 0, ":2: invalid UTF-8 at byte 8 of the line (file offset 20); on_invalid: skip or replace reads past such lines"},
		{OnInvalidSkip, fields, []string{"ok", "end"}, 1, 0, ""},
		{OnInvalidReplace, fields, []string{"ok", "b\uFFFDd", "end"}, 0, 1, ""},
		{OnInvalidReplace, nil, []string{`{"t": "ok"}`, "{\"t\": \"b\uFFFDd\"}", `{"t": "end"}`}, 0, 1, ""},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d-%s", i, c.mode), func(t *testing.T) {
			name := "t"
			if c.fields == nil {
				name = "json"
			}
			got, s, r, err := readCounting(t, FilesOptions{Paths: []string{p}, Format: FormatJSONL, Fields: c.fields, OnInvalid: c.mode}, name)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), p+c.err)) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
			if !reflect.DeepEqual(got, c.texts) || s != c.skipped || r != c.replaced {
				t.Fatalf("got %q skipped %d replaced %d, want %q %d %d", got, s, r, c.texts, c.skipped, c.replaced)
			}
		})
	}
}

// A line longer than max_record_bytes is an error in every mode: the
// bound applies to the line as read, before any check.
func TestInvalidUTF8StillBounded(t *testing.T) {
	p := writeFile(t, t.TempDir(), "l.txt", "ok\n"+strings.Repeat("\xff", 5000)+"\n")
	for _, mode := range []string{OnInvalidSkip, OnInvalidReplace} {
		_, _, _, err := readCounting(t, FilesOptions{Paths: []string{p}, Format: FormatLines, OnInvalid: mode, MaxRecordBytes: 4096}, "text")
		if !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("%s: %v", mode, err)
		}
	}
	got, _, r, err := readCounting(t, FilesOptions{Paths: []string{p}, Format: FormatLines, OnInvalid: OnInvalidReplace, MaxRecordBytes: 5000}, "text")
	if err != nil || r != 1 || got[1] != strings.Repeat("\uFFFD", 5000) {
		t.Fatalf("err %v replaced %d", err, r)
	}
}
