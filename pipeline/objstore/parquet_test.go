package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/feedmesh/feedmesh/internal/pqshard"
	"github.com/feedmesh/feedmesh/pipeline/formats"
)

// TestParquetFetchesWhatItReads reads a Parquet object split by split
// and counts its range requests and the bytes they asked for: the footer
// once and the projected column chunks, not whole chunks of the cache
// around the few bytes at either end (which was the whole object per
// split).
func TestParquetFetchesWhatItReads(t *testing.T) {
	f := startFixture(t)
	ctx := context.Background()
	var b bytes.Buffer
	if err := pqshard.Write(&b, 0, 10000, 2500, 64); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Put(ctx, "data", "s.parquet", b.Bytes()); err != nil {
		t.Fatal(err)
	}
	p := newFaultProxy(t, f.srv.Endpoint)
	cfg := f.srv.Config()
	cfg.Endpoint = p.URL
	o := formats.FilesOptions{Paths: []string{"s3://data/s.parquet"}, Format: formats.FormatParquet, Columns: []string{"id", "tokens"}, Store: cfg}
	splits, err := formats.FileSplits(o)
	if err != nil || len(splits) != 4 {
		t.Fatalf("%d splits, %v", len(splits), err)
	}
	rows := 0
	for _, s := range splits {
		it, err := formats.OpenFiles(ctx, o, s)
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			rows++
		}
		it.Close()
	}
	_, _, ranges := p.counts()
	var fetched int64
	for _, r := range ranges {
		var a, z int64
		if _, err := fmt.Sscanf(r, "bytes=%d-%d", &a, &z); err != nil {
			t.Fatalf("range %q: %v", r, err)
		}
		fetched += z - a + 1
	}
	// The text column is not projected; the footer is read once (64 KiB
	// at most), to list the splits, then found in the footer cache.
	limit := int64(b.Len()) + 64<<10
	if rows != 10000 || fetched > limit || len(ranges) != 1+4*2 {
		t.Fatalf("%d rows; %d range requests (want 9: the footer, then 2 column chunks per row group) fetched %d bytes of a %d-byte object, want at most %d: %v", rows, len(ranges), fetched, b.Len(), limit, ranges)
	}
	t.Logf("%d range requests, %d bytes for a %d-byte object", len(ranges), fetched, b.Len())
}
