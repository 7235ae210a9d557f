package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

// The files in testdata/parquet were written by Apache Arrow's Go
// implementation, not by parquet-go which reads them here:
//
//	cd scripts/parquetgen && go run . gen ../../pipeline/formats/testdata/parquet
//
// mixedRow is what row i holds (scripts/parquetgen/gen.go's appendMixedRow);
// nil means null. Lists hold nil for a null element.
type pqRow struct {
	id     int64
	text   *string
	tokens []*int32 // nil: a null list
	ids64  []int64
	emb    []float32
	blob   []byte
	flag   bool
	score  *float64
	words  []string
}

func mixedRow(i int) pqRow {
	r := pqRow{id: int64(i), ids64: []int64{}, emb: []float32{float32(i) / 2, -float32(i)}, flag: i%2 == 0, words: []string{}}
	if i%4 != 3 {
		s := fmt.Sprintf("row %d é", i)
		r.text = &s
	}
	if i%5 != 4 {
		r.tokens = []*int32{}
		for j := 0; j < i%3+i%5; j++ {
			if i%7 == 6 && j == 1 {
				r.tokens = append(r.tokens, nil)
			} else {
				v := int32(i*100 + j)
				r.tokens = append(r.tokens, &v)
			}
		}
	}
	for j := 0; j < i%2; j++ {
		r.ids64 = append(r.ids64, int64(i)*10_000_000_000)
	}
	if i%6 != 5 {
		r.blob = []byte{byte(i), 0, 0xff}
	}
	if i != 2 {
		s := float64(i) * 0.25
		r.score = &s
	}
	for j := 0; j < i%3; j++ {
		r.words = append(r.words, fmt.Sprintf("w%d", j))
	}
	return r
}

// hasNull says whether the row has a null anywhere (a skip drops it).
func (r pqRow) hasNull() bool {
	return r.text == nil || r.tokens == nil || slices.Contains(r.tokens, nil) || r.blob == nil || r.score == nil
}

func pqPath(name string) string { return filepath.Join("testdata", "parquet", name) }

func tensorOf(t *testing.T, e tensor.Element, name string) *tensor.Tensor {
	t.Helper()
	x, ok := e.Get(name)
	if !ok {
		t.Fatalf("no tensor %q in %v", name, e)
	}
	return x
}

// checkMixedRow compares an element with mixedRow(i) read with on_null: zero.
func checkMixedRow(t *testing.T, e tensor.Element, i int) {
	t.Helper()
	want := mixedRow(i)
	if got := int64Of(t, e, "id"); got != want.id {
		t.Fatalf("row %d: id %d", i, got)
	}
	text := tensorOf(t, e, "text")
	wantText := ""
	if want.text != nil {
		wantText = *want.text
	}
	if text.DType != tensor.Bytes || len(text.Shape) != 0 || string(text.Entry(0)) != wantText {
		t.Errorf("row %d: text %+v, want %q", i, text, wantText)
	}
	tok := tensorOf(t, e, "tokens")
	got, err := tok.Int32s()
	if err != nil {
		t.Fatal(err)
	}
	var wantTok []int32
	for _, v := range want.tokens {
		if v == nil {
			wantTok = append(wantTok, 0)
		} else {
			wantTok = append(wantTok, *v)
		}
	}
	if !slices.Equal(got, wantTok) || !slices.Equal(tok.Shape, []int64{int64(len(wantTok))}) {
		t.Errorf("row %d: tokens %v shape %v, want %v", i, got, tok.Shape, wantTok)
	}
	ids, _ := tensorOf(t, e, "ids64").Int64s()
	if !slices.Equal(ids, want.ids64) {
		t.Errorf("row %d: ids64 %v, want %v", i, ids, want.ids64)
	}
	emb, _ := tensorOf(t, e, "emb").Float32s()
	if !slices.Equal(emb, want.emb) {
		t.Errorf("row %d: emb %v, want %v", i, emb, want.emb)
	}
	if b := tensorOf(t, e, "blob").Entry(0); !bytes.Equal(b, want.blob) {
		t.Errorf("row %d: blob %v, want %v", i, b, want.blob)
	}
	if f := tensorOf(t, e, "flag"); f.DType != tensor.Bool || (f.Data[0] == 1) != want.flag {
		t.Errorf("row %d: flag %v, want %v", i, f.Data, want.flag)
	}
	sc, _ := tensorOf(t, e, "score").Float64s()
	wantScore := 0.0
	if want.score != nil {
		wantScore = *want.score
	}
	if len(sc) != 1 || sc[0] != wantScore {
		t.Errorf("row %d: score %v, want %v", i, sc, wantScore)
	}
	w := tensorOf(t, e, "words")
	var words []string
	for k := range int(w.NumValues()) {
		words = append(words, string(w.Entry(k)))
	}
	if !slices.Equal(words, want.words) && !(len(words) == 0 && len(want.words) == 0) {
		t.Errorf("row %d: words %q, want %q", i, words, want.words)
	}
}

func TestParquetArrowWritten(t *testing.T) {
	for _, tc := range []struct {
		file         string
		rows, groups int
	}{{"mixed.parquet", 10, 3}, {"plain.parquet", 1000, 4}} {
		t.Run(tc.file, func(t *testing.T) {
			o := FilesOptions{Paths: []string{pqPath(tc.file)}, Format: FormatParquet, OnNull: OnNullZero}
			splits, err := FileSplits(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(splits) != tc.groups {
				t.Fatalf("%d splits, want one per row group (%d)", len(splits), tc.groups)
			}
			els, err := readAllFiles(t, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(els) != tc.rows {
				t.Fatalf("%d rows, want %d", len(els), tc.rows)
			}
			for i, e := range els {
				checkMixedRow(t, e, i)
			}
		})
	}
}

func TestParquetOnNull(t *testing.T) {
	o := FilesOptions{Paths: []string{pqPath("plain.parquet")}, Format: FormatParquet, OnNull: OnNullSkip}
	splits, err := FileSplits(o)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	var skipped int64
	for _, s := range splits {
		it, err := OpenFiles(context.Background(), o, s)
		if err != nil {
			t.Fatal(err)
		}
		els, err := drain(t, it)
		if err != nil {
			t.Fatal(err)
		}
		skipped += it.(interface{ Skipped() int64 }).Skipped()
		for _, e := range els {
			ids = append(ids, int64Of(t, e, "id"))
		}
	}
	var want []int64
	for i := range 1000 {
		if !mixedRow(i).hasNull() {
			want = append(want, int64(i))
		}
	}
	if !slices.Equal(ids, want) || skipped != int64(1000-len(want)) {
		t.Fatalf("skip: read %d rows (skipped %d), want %d (skipped %d)", len(ids), skipped, len(want), 1000-len(want))
	}

	// fail (the default) names the file, row group, row and column.
	o.OnNull = ""
	_, err = readAllFiles(t, o)
	if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "plain.parquet: row group 0: row 2: column \"score\" is null") {
		t.Fatalf("on_null fail: %v", err)
	}
	// A projection without nullable columns reads every row.
	o.Columns = []string{"emb", "id"}
	els, err := readAllFiles(t, o)
	if err != nil || len(els) != 1000 {
		t.Fatalf("projection: %d rows, %v", len(els), err)
	}
	if n := len(els[7].Tensors); n != 2 || els[7].Tensors[0].Name != "emb" || els[7].Tensors[1].Name != "id" {
		t.Fatalf("projection: tensors %+v, want emb, id in that order", els[7].Tensors)
	}
}

func TestParquetErrors(t *testing.T) {
	_, err := FileSplits(FilesOptions{Paths: []string{pqPath("corrupt-footer.parquet")}, Format: FormatParquet})
	if !errors.Is(err, ErrCorruptFile) || !strings.Contains(err.Error(), "corrupt-footer.parquet") {
		t.Fatalf("corrupt footer: %v", err)
	}
	t.Log(err)
	// skip_corrupt: the file is one empty split, counted as skipped.
	o := FilesOptions{Paths: []string{pqPath("corrupt-footer.parquet"), pqPath("mixed.parquet")}, Format: FormatParquet, SkipCorrupt: true, OnNull: OnNullZero}
	splits, err := FileSplits(o)
	if err != nil || len(splits) != 4 {
		t.Fatalf("skip_corrupt: %d splits, %v", len(splits), err)
	}
	it, err := OpenFiles(context.Background(), o, splits[0])
	if err != nil {
		t.Fatal(err)
	}
	els, err := drain(t, it)
	if err != nil || len(els) != 0 || it.(interface{ Skipped() int64 }).Skipped() != 1 {
		t.Fatalf("skip_corrupt: %d rows, %v", len(els), err)
	}

	_, err = FileSplits(FilesOptions{Paths: []string{pqPath("mixed.parquet")}, Format: FormatParquet, Columns: []string{"id", "nope"}})
	if err == nil || !strings.Contains(err.Error(), `column "nope" is not in the file (it has: blob, emb, flag, id, ids64, score, text, tokens, words)`) {
		t.Fatalf("unknown column: %v", err)
	}
	for _, o := range []FilesOptions{
		{Paths: []string{"x"}, Format: FormatParquet, OnNull: "maybe"},
		{Paths: []string{"x"}, Format: FormatParquet, SplitBytes: 10},
		{Paths: []string{"x"}, Format: FormatLines, Columns: []string{"a"}},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
	// A file that is not Parquet at all.
	p := writeFile(t, t.TempDir(), "x.parquet", "PAR1 but not really")
	if _, err := FileSplits(FilesOptions{Paths: []string{p}, Format: FormatParquet}); !errors.Is(err, ErrCorruptFile) || !strings.Contains(err.Error(), p) {
		t.Fatalf("not parquet: %v", err)
	}
}

// TestParquetDamagedPages damages a file's column data: errors name the
// file, nothing panics, and with skip_corrupt every row is either read or
// counted as skipped.
func TestParquetDamagedPages(t *testing.T) {
	b, err := os.ReadFile(pqPath("plain.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, at := range []int{100, 2000, 9000, 20000} {
		d := slices.Clone(b)
		for k := at; k < at+64; k++ {
			d[k] ^= 0x5a
		}
		p := filepath.Join(dir, fmt.Sprintf("damaged-%d.parquet", at))
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatParquet, OnNull: OnNullZero})
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("damaged at %d: error does not name the file: %v", at, err)
		}
		t.Logf("damaged at %d: %v", at, err)

		o := FilesOptions{Paths: []string{p}, Format: FormatParquet, OnNull: OnNullZero, SkipCorrupt: true}
		splits, err := FileSplits(o)
		if err != nil {
			t.Fatal(err)
		}
		read, skipped := 0, int64(0)
		for _, s := range splits {
			it, err := OpenFiles(context.Background(), o, s)
			if err != nil {
				t.Fatal(err)
			}
			els, err := drain(t, it)
			if err != nil {
				t.Fatalf("damaged at %d, skip_corrupt: %v", at, err)
			}
			read += len(els)
			skipped += it.(interface{ Skipped() int64 }).Skipped()
		}
		if skipped == 0 || int64(read)+skipped != 1000 {
			t.Errorf("damaged at %d, skip_corrupt: %d rows read + %d skipped, want 1000 with some skipped", at, read, skipped)
		}
	}
}
