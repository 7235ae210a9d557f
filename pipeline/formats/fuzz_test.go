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
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/tensor"
)

// fuzzRead writes data to a file and reads it with o (whole file, and in
// byte-range splits when splitBytes > 0). Readers must never panic and
// must either finish or return an error.
func fuzzRead(t *testing.T, name string, data []byte, o FilesOptions, splitBytes int64) {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Paths = []string{p}
	o.MaxRecordBytes = 1 << 20
	whole, errWhole := readAllFiles(t, o)
	if splitBytes <= 0 {
		return
	}
	o.SplitBytes = splitBytes
	split, errSplit := readAllFiles(t, o)
	// Splitting must not change what a valid file yields.
	if errWhole == nil && errSplit == nil && len(whole) != len(split) {
		t.Fatalf("whole file gave %d elements, splits of %d bytes gave %d", len(whole), splitBytes, len(split))
	}
}

func FuzzTFRecordReader(f *testing.F) {
	var buf bytes.Buffer
	WriteTFRecord(&buf, []byte("hello"))
	WriteTFRecord(&buf, nil)
	WriteTFRecord(&buf, bytes.Repeat([]byte("x"), 300))
	f.Add(buf.Bytes(), int64(20), false)
	f.Add(buf.Bytes()[:30], int64(0), true)
	f.Add([]byte{}, int64(0), false)
	f.Fuzz(func(t *testing.T, data []byte, splitBytes int64, skip bool) {
		fuzzRead(t, "f.tfrecord", data, FilesOptions{Format: FormatTFRecord, SkipCorrupt: skip}, splitBytes%4096)
		// Skip mode never fails on corruption.
		if skip {
			p := filepath.Join(t.TempDir(), "s.tfrecord")
			os.WriteFile(p, data, 0o644)
			it, err := OpenFiles(context.Background(), FilesOptions{Paths: []string{p}, Format: FormatTFRecord, SkipCorrupt: true}, Split{Path: p, End: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			for {
				_, err := it.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil && (errors.Is(err, ErrCorruptRecord) || errors.Is(err, ErrTruncatedRecord)) {
					t.Fatalf("skip mode returned %v", err)
				}
				if err != nil {
					break
				}
			}
		}
	})
}

func FuzzJSONLReader(f *testing.F) {
	f.Add([]byte(`{"a": 1, "b": "x", "c": [1,2]}`+"\n"+`{"a": 2, "b": "y", "c": []}`+"\n"), int64(10))
	f.Add([]byte("{\"a\": 1e400, \"b\": null}\n\n  \n{"), int64(0))
	f.Add([]byte("\xff\xfe\n[1,2]\n"), int64(3))
	fields := []Field{{Name: "a", DType: tensor.Float32}, {Name: "b"}, {Name: "c", DType: tensor.Int64}}
	f.Fuzz(func(t *testing.T, data []byte, splitBytes int64) {
		fuzzRead(t, "f.jsonl", data, FilesOptions{Format: FormatJSONL, Fields: fields}, splitBytes%512)
		fuzzRead(t, "g.jsonl", data, FilesOptions{Format: FormatJSONL}, 0)
		fuzzRead(t, "h.txt", data, FilesOptions{Format: FormatLines}, splitBytes%512)
		for _, mode := range []string{OnInvalidSkip, OnInvalidReplace} {
			fuzzRead(t, "i.txt", data, FilesOptions{Format: FormatLines, OnInvalid: mode}, splitBytes%512)
			fuzzRead(t, "j.jsonl", data, FilesOptions{Format: FormatJSONL, Fields: fields, OnInvalid: mode}, splitBytes%512)
		}
		fuzzRead(t, "k.txt", data, FilesOptions{Format: FormatLines, Encoding: EncodingBytes}, splitBytes%512)
		// skip and replace never fail on a text file, and yield UTF-8.
		p := filepath.Join(t.TempDir(), "u.txt")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{OnInvalidSkip, OnInvalidReplace} {
			els, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatLines, OnInvalid: mode})
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			for _, e := range els {
				if tt, _ := e.Get("text"); !utf8.Valid(tt.Entry(0)) {
					t.Fatalf("%s yielded invalid UTF-8 %q", mode, tt.Entry(0))
				}
			}
		}
	})
}

func FuzzCSVReader(f *testing.F) {
	f.Add([]byte("a,b,c\n1,2.5,x\n3,4,\"y\nz\"\n"), int64(5))
	f.Add([]byte("a,b,c\n1,2\n\"\n"), int64(0))
	f.Add([]byte("a\n"), int64(1))
	fields := []Field{{Name: "a", DType: tensor.Int32}, {Name: "b", DType: tensor.Float64}, {Name: "c"}}
	f.Fuzz(func(t *testing.T, data []byte, splitBytes int64) {
		fuzzRead(t, "f.csv", data, FilesOptions{Format: FormatCSV, Fields: fields}, splitBytes%512)
		fuzzRead(t, "g.csv", data, FilesOptions{Format: FormatCSV}, splitBytes%512)
	})
}

// FuzzParquetReader reads mutated Parquet files (seeded with the files
// Arrow wrote): never a panic, and every error names the file.
func FuzzParquetReader(f *testing.F) {
	for _, name := range []string{"mixed.parquet", "plain.parquet"} {
		b, err := os.ReadFile(pqPath(name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"), false)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		p := filepath.Join(t.TempDir(), "f.parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatParquet, OnNull: OnNullZero, SkipCorrupt: skip, MaxRecordBytes: 1 << 20})
		if err != nil && !strings.Contains(err.Error(), p) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
