// Package pqshard writes Parquet shards of synthetic language-model rows
// (an id, a text and its token ids) for this module's tests and
// benchmarks, with parquet-go, the library the product reads with. Tests
// of the reader's correctness use files from an independent writer
// (pipeline/formats/testdata/parquet); these shards only need to be many
// and checkable: row i's values are a function of i.
package pqshard

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

// Row is one row of a shard.
type Row struct {
	ID     int64   `parquet:"id"`
	Text   string  `parquet:"text"`
	Tokens []int32 `parquet:"tokens,list"`
}

// MakeRow returns row id: a text of 1 + id%TextWords words and as many
// tokens. words bounds the text's length (0: 64).
func MakeRow(id int64, words int) Row {
	if words <= 0 {
		words = 64
	}
	n := 1 + int(id%int64(words))
	r := Row{ID: id, Tokens: make([]int32, n)}
	b := make([]byte, 0, 8*n)
	for j := range n {
		w := int32((id*31 + int64(j)*7) % 50000)
		r.Tokens[j] = w
		if j > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "w%d", w)
	}
	r.Text = string(b)
	return r
}

// Write writes rows [first, first+rows) in row groups of perGroup rows,
// snappy-compressed.
func Write(w io.Writer, first, rows, perGroup int64, words int) error {
	pw := parquet.NewGenericWriter[Row](w, parquet.MaxRowsPerRowGroup(perGroup), parquet.Compression(&snappy.Codec{}))
	batch := make([]Row, 0, 256)
	for i := first; i < first+rows; i++ {
		batch = append(batch, MakeRow(i, words))
		if len(batch) == cap(batch) || i == first+rows-1 {
			if _, err := pw.Write(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return pw.Close()
}
