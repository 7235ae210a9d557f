// Command parquetgen writes the Parquet files feedmesh's tests read, with
// Apache Arrow's Go implementation (github.com/apache/arrow-go), so that
// the reader feedmesh uses (parquet-go) is checked against an independent
// writer. It lives in a Go module of its own: neither Arrow nor the
// benchmark below is in the product's import graph.
//
//	cd scripts/parquetgen && go run . gen ../../pipeline/formats/testdata/parquet
//	cd scripts/parquetgen && go run . bench [-rows 200000] [-runs 5]
//
// gen writes mixed.parquet (10 rows in 3 row groups, dictionary-encoded,
// snappy: nulls at every level), plain.parquet (1000 rows in 4 row groups,
// no dictionary, zstd, small pages so rows span pages) and
// corrupt-footer.parquet (mixed.parquet with its footer damaged). The
// values are a function of the row number, which the tests recompute
// (pipeline/formats/parquet_test.go: mixedRow).
//
// bench writes one file of text and token rows, then reads it with
// feedmesh's Parquet source and with Arrow's column readers decoding the
// same columns to the same tensors, alternating, and prints the medians
// and their ratio.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: parquetgen gen DIR | bench [-rows N] [-runs N]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		if len(os.Args) != 3 {
			err = fmt.Errorf("usage: parquetgen gen DIR")
			break
		}
		err = gen(os.Args[2])
	case "bench":
		err = bench(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "parquetgen:", err)
		os.Exit(1)
	}
}
