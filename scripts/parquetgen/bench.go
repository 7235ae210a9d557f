package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/feedmesh/feedmesh/internal/pqshard"
	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/tensor"
)

// The benchmark's rows are internal/pqshard's: an int64 id, a text and
// its token ids (list<int32>), as a tokenized text corpus holds.
var shardSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "text", Type: arrow.BinaryTypes.String},
	{Name: "tokens", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int32})},
}, nil)

func writeArrowShard(path string, rows, perGroup int64, words int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(shardSchema, f,
		parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	for start := int64(0); start < rows; start += perGroup {
		b := array.NewRecordBuilder(memory.DefaultAllocator, shardSchema)
		for i := start; i < min(start+perGroup, rows); i++ {
			r := pqshard.MakeRow(i, words)
			b.Field(0).(*array.Int64Builder).Append(r.ID)
			b.Field(1).(*array.StringBuilder).Append(r.Text)
			l := b.Field(2).(*array.ListBuilder)
			l.Append(true)
			l.ValueBuilder().(*array.Int32Builder).AppendValues(r.Tokens, nil)
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		b.Release()
		if err != nil {
			return err
		}
	}
	return w.Close()
}

// result of one read of a file.
type result struct {
	rows, bytes int64 // rows and tensor bytes delivered
	d           time.Duration
}

// readFeedmesh reads the file as a feedmesh worker does: every row group
// (split) through the parquet source, one element per row.
func readFeedmesh(path string) (result, error) {
	start := time.Now()
	o := formats.FilesOptions{Paths: []string{path}, Format: formats.FormatParquet}
	splits, err := formats.FileSplits(o)
	if err != nil {
		return result{}, err
	}
	var r result
	ctx := context.Background()
	for _, s := range splits {
		it, err := formats.OpenFiles(ctx, o, s)
		if err != nil {
			return r, err
		}
		for {
			e, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				it.Close()
				return r, err
			}
			r.rows++
			r.bytes += int64(e.ByteSize())
		}
		it.Close()
	}
	r.d = time.Since(start)
	return r, nil
}

// readArrow reads the file with Arrow's reader into record batches and,
// when rows is set, turns each row into the same tensors feedmesh makes
// (what a worker needs: one element per row).
func readArrow(path string, rows bool) (result, error) {
	start := time.Now()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return result{}, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return result{}, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return result{}, err
	}
	defer rr.Release()
	var r result
	for rr.Next() {
		rec := rr.RecordBatch()
		ids := rec.Column(0).(*array.Int64)
		texts := rec.Column(1).(*array.String)
		toks := rec.Column(2).(*array.List)
		vals := toks.ListValues().(*array.Int32)
		offs := toks.Offsets()
		n := int(rec.NumRows())
		if !rows {
			r.rows += int64(n)
			r.bytes += int64(8*n + len(texts.ValueBytes()) + 4*int(offs[n]-offs[0]))
			continue
		}
		for i := range n {
			text := texts.Value(i)
			tv := vals.Int32Values()[offs[i]:offs[i+1]]
			data := make([]byte, 0, 8+len(text)+4*len(tv))
			data = binary.LittleEndian.AppendUint64(data, uint64(ids.Value(i)))
			data = append(data, text...)
			for _, v := range tv {
				data = binary.LittleEndian.AppendUint32(data, uint32(v))
			}
			e := tensor.Element{Tensors: []tensor.Tensor{
				{Name: "id", DType: tensor.Int64, Data: data[:8]},
				{Name: "text", DType: tensor.Bytes, Data: data[8 : 8+len(text)], Offsets: []int64{0, int64(len(text))}},
				{Name: "tokens", DType: tensor.Int32, Shape: []int64{int64(len(tv))}, Data: data[8+len(text):]},
			}}
			r.rows++
			r.bytes += int64(e.ByteSize())
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return r, err
	}
	r.d = time.Since(start)
	return r, nil
}

func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rows := fs.Int64("rows", 200_000, "rows per file")
	perGroup := fs.Int64("row-group", 20_000, "rows per row group")
	words := fs.Int("words", 64, "a row holds 1 to this many tokens (and words)")
	runs := fs.Int("runs", 5, "reads per reader and file; the median is reported")
	procs := fs.Int("procs", 1, "GOMAXPROCS (1: throughput per core)")
	dir := fs.String("dir", "", "where to write the files (default: a temporary directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	runtime.GOMAXPROCS(*procs)
	if *dir == "" {
		d, err := os.MkdirTemp("", "parquetbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	files := []struct{ writer, path string }{
		{"arrow-go", filepath.Join(*dir, "arrow.parquet")},
		{"parquet-go", filepath.Join(*dir, "parquet-go.parquet")},
	}
	if err := writeArrowShard(files[0].path, *rows, *perGroup, *words); err != nil {
		return err
	}
	f, err := os.Create(files[1].path)
	if err != nil {
		return err
	}
	if err := pqshard.Write(f, 0, *rows, *perGroup, *words); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	readers := []struct {
		name string
		read func(string) (result, error)
	}{
		{"feedmesh (parquet-go), rows to tensors", readFeedmesh},
		{"arrow-go pqarrow, rows to tensors", func(p string) (result, error) { return readArrow(p, true) }},
		{"arrow-go pqarrow, record batches only", func(p string) (result, error) { return readArrow(p, false) }},
	}
	fmt.Printf("rows %d, row groups of %d, 1-%d tokens per row, GOMAXPROCS %d, %d runs (median), %s\n",
		*rows, *perGroup, *words, *procs, *runs, runtime.Version())
	fmt.Printf("%-12s %-40s %12s %12s %14s %9s\n", "file from", "reader", "rows/s", "file MB/s", "tensor MB/s", "× feedmesh")
	for _, fl := range files {
		st, err := os.Stat(fl.path)
		if err != nil {
			return err
		}
		res := make([][]result, len(readers))
		for range *runs { // alternate the readers, so load hits them alike
			for i, rd := range readers {
				runtime.GC()
				r, err := rd.read(fl.path)
				if err != nil {
					return fmt.Errorf("%s reading %s: %w", rd.name, fl.path, err)
				}
				if r.rows != *rows {
					return fmt.Errorf("%s read %d rows of %s, want %d", rd.name, r.rows, fl.path, *rows)
				}
				res[i] = append(res[i], r)
			}
		}
		var base float64
		for i, rd := range readers {
			slices.SortFunc(res[i], func(a, b result) int { return int(a.d - b.d) })
			m := res[i][len(res[i])/2]
			sec := m.d.Seconds()
			rps := float64(m.rows) / sec
			if i == 0 {
				base = rps
			}
			fmt.Printf("%-12s %-40s %12.0f %12.1f %14.1f %9.2f\n", fl.writer, rd.name, rps,
				float64(st.Size())/sec/1e6, float64(m.bytes)/sec/1e6, rps/base)
		}
		fmt.Printf("%-12s (file: %.1f MB)\n", "", float64(st.Size())/1e6)
	}
	return nil
}
