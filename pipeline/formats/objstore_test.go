package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/internal/pqshard"
	"github.com/feedmesh/feedmesh/internal/s3test"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// The formats read objects in a real S3-compatible server (versitygw on
// loopback) as they read local files.

func putFile(t *testing.T, srv *s3test.Server, key, local string) {
	t.Helper()
	b, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Put(context.Background(), "data", key, b); err != nil {
		t.Fatal(err)
	}
}

func startS3(t *testing.T) *s3test.Server {
	srv := s3test.StartT(t)
	s3test.SetCredentials(t)
	if err := srv.MakeBucket(context.Background(), "data"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(objstore.CloseIdleConnections)
	return srv
}

func TestFormatsOverS3(t *testing.T) {
	srv := startS3(t)
	ctx := context.Background()
	cfg := srv.Config()

	// Parquet written by Arrow: the same values as from disk.
	putFile(t, srv, "arrow/plain.parquet", pqPath("plain.parquet"))
	els, err := readAllFiles(t, FilesOptions{Paths: []string{"s3://data/arrow/*.parquet"}, Format: FormatParquet, OnNull: OnNullZero, Store: cfg})
	if err != nil || len(els) != 1000 {
		t.Fatalf("arrow file from s3: %d rows, %v", len(els), err)
	}
	for i, e := range els {
		checkMixedRow(t, e, i)
	}

	// Shards: a split per row group, every row once.
	for s := range 3 {
		var b bytes.Buffer
		if err := pqshard.Write(&b, int64(s)*300, 300, 100, 16); err != nil {
			t.Fatal(err)
		}
		if err := srv.Put(ctx, "data", fmt.Sprintf("shards/part-%03d.parquet", s), b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	o := FilesOptions{Paths: []string{"s3://data/shards/part-*.parquet"}, Format: FormatParquet, Columns: []string{"tokens", "id"}, Store: cfg}
	splits, err := FileSplits(o)
	if err != nil || len(splits) != 9 {
		t.Fatalf("shards: %d splits, %v; want 9 (3 row groups each)", len(splits), err)
	}
	els, err = readAllFiles(t, o)
	if err != nil || len(els) != 900 {
		t.Fatalf("shards: %d rows, %v", len(els), err)
	}
	for i, e := range els {
		id := int64Of(t, e, "id")
		tok, _ := tensorOf(t, e, "tokens").Int32s()
		if id != int64(i) || !slices.Equal(tok, pqshard.MakeRow(id, 16).Tokens) {
			t.Fatalf("row %d: id %d tokens %v", i, id, tok)
		}
	}

	// Lines cut at byte ranges: every line once.
	var lines bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	srv.Put(ctx, "data", "text/lines.txt", lines.Bytes())
	lo := FilesOptions{Paths: []string{"s3://data/text/lines.txt"}, Format: FormatLines, SplitBytes: 1000, Store: cfg}
	if splits, err := FileSplits(lo); err != nil || len(splits) < 10 {
		t.Fatalf("lines: %d splits, %v", len(splits), err)
	}
	els, err = readAllFiles(t, lo)
	if err != nil {
		t.Fatal(err)
	}
	got := texts(t, els, "text")
	if len(got) != 2000 || got[0] != "line 0" || got[1999] != "line 1999" {
		t.Fatalf("lines: %d, first %q", len(got), got[:1])
	}

	// WebDataset, streamed from the object.
	putFile(t, srv, "wds/shard-000000.tar", pyShard)
	local, err := readAllFiles(t, FilesOptions{Paths: []string{pyShard}, Format: FormatWebDataset})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := readAllFiles(t, FilesOptions{Paths: []string{"s3://data/wds/*.tar"}, Format: FormatWebDataset, Store: cfg})
	if err != nil || len(remote) != len(local) {
		t.Fatalf("webdataset: %d samples, %v", len(remote), err)
	}
	for i := range local {
		if !reflect.DeepEqual(sampleMap(t, local[i]), sampleMap(t, remote[i])) {
			t.Fatalf("webdataset sample %d differs", i)
		}
	}

	// A corrupt footer in the bucket names the object; skip_corrupt counts it.
	putFile(t, srv, "bad/corrupt-footer.parquet", pqPath("corrupt-footer.parquet"))
	_, err = FileSplits(FilesOptions{Paths: []string{"s3://data/bad/*.parquet"}, Format: FormatParquet, Store: cfg})
	if !errors.Is(err, ErrCorruptFile) || !strings.Contains(err.Error(), "s3://data/bad/corrupt-footer.parquet") {
		t.Fatalf("corrupt footer: %v", err)
	}

	// No match, no bucket: errors naming the path.
	if _, err := FileSplits(FilesOptions{Paths: []string{"s3://data/none/*.parquet"}, Format: FormatParquet, Store: cfg}); !errors.Is(err, ErrNoMatch) || !strings.Contains(err.Error(), "s3://data/none/*.parquet") {
		t.Fatalf("no match: %v", err)
	}
	if _, err := FileSplits(FilesOptions{Paths: []string{"s3://nobucket/*.parquet"}, Format: FormatParquet, Store: cfg}); !errors.Is(err, objstore.ErrNoBucket) {
		t.Fatalf("no bucket: %v", err)
	}
}

// TestParquetObjectDeletedMidRead deletes a shard after its split was
// opened: the next row group's read is an error naming the object.
func TestParquetObjectDeletedMidRead(t *testing.T) {
	srv := startS3(t)
	ctx := context.Background()
	var b bytes.Buffer
	if err := pqshard.Write(&b, 0, 300, 100, 16); err != nil {
		t.Fatal(err)
	}
	srv.Put(ctx, "data", "shards/part-000.parquet", b.Bytes())
	o := FilesOptions{Paths: []string{"s3://data/shards/part-000.parquet"}, Format: FormatParquet, Store: srv.Config()}
	splits, err := FileSplits(o)
	if err != nil || len(splits) != 3 {
		t.Fatalf("%d splits, %v", len(splits), err)
	}
	// One split over two row groups, to delete between them.
	s := splits[0]
	s.End = 2
	it, err := OpenFiles(ctx, o, s)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for range 100 {
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Delete(ctx, "data", "shards/part-000.parquet"); err != nil {
		t.Fatal(err)
	}
	_, err = it.Next(ctx)
	if !errors.Is(err, objstore.ErrVanished) || !strings.Contains(err.Error(), "s3://data/shards/part-000.parquet") {
		t.Fatalf("after the delete: %v; want ErrVanished naming the object", err)
	}
	t.Log(err)
}
