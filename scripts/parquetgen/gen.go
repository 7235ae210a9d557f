package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

var mixedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tokens", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	{Name: "ids64", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Int64}), Nullable: false},
	{Name: "emb", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Float32}), Nullable: true},
	{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "words", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String}), Nullable: true},
}, nil)

// appendMixedRow appends row i; parquet_test.go's mixedRow says the same.
func appendMixedRow(b *array.RecordBuilder, i int) {
	b.Field(0).(*array.Int64Builder).Append(int64(i))
	text := b.Field(1).(*array.StringBuilder)
	if i%4 == 3 {
		text.AppendNull()
	} else {
		text.Append(fmt.Sprintf("row %d é", i))
	}
	tok := b.Field(2).(*array.ListBuilder)
	tv := tok.ValueBuilder().(*array.Int32Builder)
	switch {
	case i%5 == 4:
		tok.AppendNull()
	default:
		tok.Append(true)
		for j := 0; j < i%3+(i%5); j++ { // 0 to 5 elements
			if i%7 == 6 && j == 1 {
				tv.AppendNull()
			} else {
				tv.Append(int32(i*100 + j))
			}
		}
	}
	ids := b.Field(3).(*array.ListBuilder)
	ids.Append(true)
	for j := 0; j < i%2; j++ {
		ids.ValueBuilder().(*array.Int64Builder).Append(int64(i) * 10_000_000_000)
	}
	emb := b.Field(4).(*array.ListBuilder)
	emb.Append(true)
	emb.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{float32(i) / 2, -float32(i)}, nil)
	blob := b.Field(5).(*array.BinaryBuilder)
	if i%6 == 5 {
		blob.AppendNull()
	} else {
		blob.Append([]byte{byte(i), 0, 0xff})
	}
	b.Field(6).(*array.BooleanBuilder).Append(i%2 == 0)
	sc := b.Field(7).(*array.Float64Builder)
	if i == 2 {
		sc.AppendNull()
	} else {
		sc.Append(float64(i) * 0.25)
	}
	w := b.Field(8).(*array.ListBuilder)
	w.Append(true)
	for j := 0; j < i%3; j++ {
		w.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("w%d", j))
	}
}

func writeMixed(path string, rows, perGroup int, props ...parquet.WriterProperty) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := pqarrow.NewFileWriter(mixedSchema, f, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	for start := 0; start < rows; start += perGroup {
		b := array.NewRecordBuilder(memory.DefaultAllocator, mixedSchema)
		for i := start; i < min(start+perGroup, rows); i++ {
			appendMixedRow(b, i)
		}
		rec := b.NewRecordBatch()
		// Write starts a new row group per record batch.
		if err := w.Write(rec); err != nil {
			return err
		}
		rec.Release()
		b.Release()
	}
	return w.Close()
}

func gen(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mixed := filepath.Join(dir, "mixed.parquet")
	if err := writeMixed(mixed, 10, 4, parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(true)); err != nil {
		return err
	}
	if err := writeMixed(filepath.Join(dir, "plain.parquet"), 1000, 250,
		parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(false),
		parquet.WithDataPageSize(512), parquet.WithBatchSize(64)); err != nil {
		return err
	}
	b, err := os.ReadFile(mixed)
	if err != nil {
		return err
	}
	// A Parquet file ends with the footer's length (4 bytes) and "PAR1":
	// damage the footer's first bytes, where its thrift struct starts.
	n := int(b[len(b)-8]) | int(b[len(b)-7])<<8 | int(b[len(b)-6])<<16 | int(b[len(b)-5])<<24
	at := len(b) - 8 - n
	for i := at; i < at+16 && i < len(b)-8; i++ {
		b[i] ^= 0xa5
	}
	return os.WriteFile(filepath.Join(dir, "corrupt-footer.parquet"), b, 0o644)
}
