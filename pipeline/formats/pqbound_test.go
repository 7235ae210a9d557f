package formats

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pqbrotli "github.com/parquet-go/parquet-go/compress/brotli"
	pqlz4 "github.com/parquet-go/parquet-go/compress/lz4"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// bombBytes is what the crafted pages inflate to: far past their
// headers' sizes, and past what the check may allocate.
const bombBytes = 64 << 20

func brotliOf(t testing.TB, b []byte) []byte {
	var z bytes.Buffer
	w := brotli.NewWriterLevel(&z, 1)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// zstdStreamOf is b as zstd frames written by a streaming encoder: no
// content size in the frame header.
func zstdStreamOf(t testing.TB, b []byte) []byte {
	var z bytes.Buffer
	w, err := zstd.NewWriter(&z, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Flush(); err != nil { // the header goes out before the size is known
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, sized := zstdContentSize(z.Bytes()); sized {
		t.Fatal("the streaming encoder wrote a content size")
	}
	return z.Bytes()
}

func zstdSizedOf(t testing.TB, b []byte) []byte {
	e, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(b, nil)
}

func lz4BlockOf(t testing.TB, b []byte) []byte {
	out := make([]byte, lz4.CompressBlockBound(len(b)))
	n, err := lz4.CompressBlock(b, out, nil)
	if err != nil || n == 0 {
		t.Fatalf("lz4: %d, %v", n, err)
	}
	return out[:n]
}

// TestParquetPagesBoundedPerCodec (issue 37, item 5): brotli, LZ4_RAW and
// zstd page data without a content size (or a sized frame followed by
// one without) that inflates past its page header's size is refused
// with a clear error, counted in bounded memory (the check allocates
// well under the bomb's 64 MiB); data of its declared size passes; a
// corrupt LZ4 block (which parquet-go retried into ever larger buffers)
// is refused.
func TestParquetPagesBoundedPerCodec(t *testing.T) {
	zero := make([]byte, bombBytes)
	small := bytes.Repeat([]byte("feedmesh "), 100)
	twoFrames := append(zstdSizedOf(t, small), zstdStreamOf(t, zero)...)
	for _, c := range []struct {
		name  string
		codec format.CompressionCodec
		data  []byte
		want  int64
		err   string // "" passes
	}{
		{"brotli bomb", format.Brotli, brotliOf(t, zero), 1 << 10, "decodes to more than 1024 bytes"},
		{"brotli of its size", format.Brotli, brotliOf(t, small), int64(len(small)), ""},
		{"lz4 bomb", format.Lz4Raw, lz4BlockOf(t, zero), 1 << 10, "decodes to more than 1024 bytes"},
		{"lz4 of its size", format.Lz4Raw, lz4BlockOf(t, small), int64(len(small)), ""},
		{"lz4 truncated", format.Lz4Raw, lz4BlockOf(t, small)[:20], int64(len(small)), "truncated"},
		{"lz4 referring before its start", format.Lz4Raw, []byte{0x10, 'a', 0x09, 0x00}, 100, "refers 9 bytes back"},
		{"zstd bomb without a content size", format.Zstd, zstdStreamOf(t, zero), 1 << 10, "decodes to more than 1024 bytes"},
		{"zstd without a content size, of its size", format.Zstd, zstdStreamOf(t, small), int64(len(small)), ""},
		{"zstd bomb after a sized frame", format.Zstd, twoFrames, int64(len(small)), "decodes to more than"},
		{"zstd sized, over its size", format.Zstd, zstdSizedOf(t, zero), 1 << 10, "decodes to more than 1024 bytes"},
		{"zstd sized, of its size", format.Zstd, zstdSizedOf(t, small), int64(len(small)), ""},
	} {
		r := bytes.NewReader(c.data)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := checkDecodedLen(r, c.codec, 0, int64(len(c.data)), c.want)
		runtime.ReadMemStats(&after)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
			t.Errorf("%s: the check allocated %d MiB", c.name, alloc>>20)
		}
	}
}

// lyingCodec writes every page as bomb, whatever the page holds: a
// crafted file whose pages inflate past their headers' sizes.
type lyingCodec struct {
	compress.Codec
	bomb []byte
}

func (c lyingCodec) Encode(dst, src []byte) ([]byte, error) { return append(dst[:0], c.bomb...), nil }

// TestParquetCraftedBombFiles: files whose pages are bombs of each codec
// fail to read, naming the page's bound, without parquet-go inflating
// them; honest files of each codec read as before.
func TestParquetCraftedBombFiles(t *testing.T) {
	type row struct {
		ID   int64  `parquet:"id"`
		Text string `parquet:"text"`
	}
	rows := make([]row, 300)
	for i := range rows {
		rows[i] = row{ID: int64(i), Text: strings.Repeat("x", i%50)}
	}
	write := func(name string, codec compress.Codec) string {
		p := filepath.Join(t.TempDir(), name+".parquet")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[row](f, parquet.Compression(codec))
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	zero := make([]byte, bombBytes)
	for name, c := range map[string]struct{ honest, bomb compress.Codec }{
		"brotli": {&pqbrotli.Codec{}, lyingCodec{&pqbrotli.Codec{}, brotliOf(t, zero)}},
		"lz4":    {&pqlz4.Codec{}, lyingCodec{&pqlz4.Codec{}, lz4BlockOf(t, zero)}},
		"zstd":   {&pqzstd.Codec{}, lyingCodec{&pqzstd.Codec{}, zstdStreamOf(t, zero)}},
	} {
		els, err := readAllFiles(t, FilesOptions{Paths: []string{write(name, c.honest)}, Format: FormatParquet})
		if err != nil || len(els) != len(rows) {
			t.Errorf("%s: an honest file: %d rows, %v", name, len(els), err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err = readAllFiles(t, FilesOptions{Paths: []string{write(name+"-bomb", c.bomb)}, Format: FormatParquet})
		runtime.ReadMemStats(&after)
		t.Logf("%s: %v", name, err)
		if err == nil || !strings.Contains(err.Error(), "decodes to more than") {
			t.Errorf("%s: a file of bomb pages: %v, want a refusal saying it decodes to more than its size", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
			t.Errorf("%s: reading the bomb file allocated %d MiB", name, alloc>>20)
		}
	}
}
