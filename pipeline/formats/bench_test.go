package formats

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileIteratorsStopOnCancel(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.txt", "a\nb\nc\n")
	var buf bytes.Buffer
	WriteTFRecord(&buf, []byte("x"))
	q := filepath.Join(dir, "b.tfrecord")
	os.WriteFile(q, buf.Bytes(), 0o644)
	c := writeFile(t, dir, "c.csv", "h\n1\n")
	for _, o := range []FilesOptions{
		{Paths: []string{p}, Format: FormatLines}, {Paths: []string{p}, Format: FormatWholeFile},
		{Paths: []string{q}, Format: FormatTFRecord}, {Paths: []string{c}, Format: FormatCSV},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		it, err := OpenFiles(ctx, o, Split{Path: o.Paths[0], End: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := it.Next(ctx); err != nil {
			t.Fatalf("%s: %v", o.Format, err)
		}
		cancel()
		if _, err := it.Next(ctx); !errors.Is(err, context.Canceled) && !(o.Format == FormatWholeFile && errors.Is(err, io.EOF)) {
			t.Fatalf("%s: after cancel got %v", o.Format, err)
		}
		it.Close()
	}
}

func benchFile(b *testing.B, o FilesOptions, size int64) {
	b.ReportAllocs()
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		it, err := OpenFiles(context.Background(), o, Split{Path: o.Paths[0], End: -1})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := it.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		it.Close()
		b.ReportMetric(float64(n), "elements/op")
	}
}

func BenchmarkReadLines(b *testing.B) {
	var sb strings.Builder
	it, _ := OpenSynthetic(context.Background(), SyntheticOptions{Kind: "text", Count: 20000, Seed: 1}, Split{End: 20000})
	for {
		e, err := it.Next(context.Background())
		if err != nil {
			break
		}
		sb.Write(e.Tensors[0].Entry(0))
		sb.WriteByte('\n')
	}
	p := writeFile(b, b.TempDir(), "corpus.txt", sb.String())
	benchFile(b, FilesOptions{Paths: []string{p}, Format: FormatLines}, int64(sb.Len()))
}

func BenchmarkReadTFRecord(b *testing.B) {
	var buf bytes.Buffer
	rec := bytes.Repeat([]byte("r"), 1000)
	for i := 0; i < 20000; i++ {
		WriteTFRecord(&buf, rec)
	}
	p := filepath.Join(b.TempDir(), "d.tfrecord")
	os.WriteFile(p, buf.Bytes(), 0o644)
	benchFile(b, FilesOptions{Paths: []string{p}, Format: FormatTFRecord}, int64(buf.Len()))
}
