package formats

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pqgzip "github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/format"
)

// A gzip page that inflates past its header's size (a decompression
// bomb) is refused before parquet-go inflates it; one that inflates to
// its size passes.
func TestParquetGzipPageBounded(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(make([]byte, 8<<20))
	zw.Close()
	r := bytes.NewReader(z.Bytes())
	err := checkDecodedLen(r, format.Gzip, 0, int64(z.Len()), 1<<10)
	if err == nil || !strings.Contains(err.Error(), "more than 1024 bytes") {
		t.Fatalf("a page of 8 MiB declared as 1 KiB: %v", err)
	}
	if err := checkDecodedLen(r, format.Gzip, 0, int64(z.Len()), 8<<20); err != nil {
		t.Fatalf("a page of its declared size: %v", err)
	}
}

// Files written with gzip pages read as before.
func TestParquetGzipFile(t *testing.T) {
	type row struct {
		ID   int64  `parquet:"id"`
		Text string `parquet:"text"`
	}
	p := filepath.Join(t.TempDir(), "gzip.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f, parquet.Compression(&pqgzip.Codec{}))
	rows := make([]row, 500)
	for i := range rows {
		rows[i] = row{ID: int64(i), Text: strings.Repeat("x", i)}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	els, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatParquet})
	if err != nil {
		t.Fatal(err)
	}
	if len(els) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(els), len(rows))
	}
}
