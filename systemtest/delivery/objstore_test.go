package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/pqshard"
	"github.com/feedmesh/feedmesh/internal/s3test"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestDynamicParquetFromS3: a DYNAMIC job over Parquet shards in a real
// S3-compatible server (versitygw on loopback), a named store of the
// nodes the spec names in its paths (s3://NAME/bucket/key), read by a
// 3-node cluster, delivers every row exactly once, each with its own
// tokens.
func TestDynamicParquetFromS3(t *testing.T) {
	t.Cleanup(objstore.CloseIdleConnections) // runs last: after the cluster's Close
	srv := s3test.StartT(t)
	s3test.SetCredentials(t) // the nodes' named store reads the credentials from the environment
	ctx := context.Background()
	if err := srv.MakeBucket(ctx, "train"); err != nil {
		t.Fatal(err)
	}
	const shards, rowsPerShard, perGroup = 8, 200, 50
	for s := range shards {
		var b bytes.Buffer
		if err := pqshard.Write(&b, int64(s*rowsPerShard), rowsPerShard, perGroup, 32); err != nil {
			t.Fatal(err)
		}
		if err := srv.Put(ctx, "train", fmt.Sprintf("corpus/shard-%05d.parquet", s), b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	// An object that the glob must leave out.
	srv.Put(ctx, "train", "corpus/README.txt", []byte("not a shard"))

	spec := pipeline.NewSpec(pipeline.Source{Files: &pipeline.FilesSource{
		Paths:   []string{"s3://lake/train/corpus/shard-*.parquet"},
		Format:  "parquet",
		Columns: []string{"id", "tokens"},
	}})
	// A cost op spreads the 32 row groups over the workers: cheap splits
	// could all go to the first worker.
	spec.Cost(0, 500)
	spec.PaddedBatch(16, 0)

	c := testcluster.Start(t, 3, withStore(srv.NamedStore("lake")))
	cl := jobtest.Dial(t, c, 1)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "s3-parquet", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	counts := map[int64]int{}
	workers := map[string]int{}
	dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		b, err := it.Next(dctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("after %d rows: %v", len(counts), err)
		}
		workers[b.Worker]++
		idt, _ := b.Get("id")
		ids, err := idt.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		tokt, _ := b.Get("tokens")
		toks, err := tokt.Int32s()
		if err != nil {
			t.Fatal(err)
		}
		width := int(tokt.Shape[1])
		for r, id := range ids {
			counts[id]++
			want := pqshard.MakeRow(id, 32).Tokens
			row := toks[r*width : (r+1)*width]
			if !slices.Equal(row[:len(want)], want) || slices.ContainsFunc(row[len(want):], func(v int32) bool { return v != 0 }) {
				t.Fatalf("row %d: tokens %v, want %v padded with 0", id, row, want)
			}
		}
	}
	for id := range int64(shards * rowsPerShard) {
		if counts[id] != 1 {
			t.Fatalf("row %d delivered %d times, want once (%d distinct rows)", id, counts[id], len(counts))
		}
	}
	if len(counts) != shards*rowsPerShard {
		t.Fatalf("%d distinct rows, want %d", len(counts), shards*rowsPerShard)
	}
	if len(workers) < 2 {
		t.Errorf("only %d workers delivered: %v", len(workers), workers)
	}
	t.Logf("batches per worker: %v", workers)
}

// TestDatasetFilesChanged: a second job of a dataset whose glob now
// matches another object fails, saying so, instead of reading split ids
// that name other data on each worker. (The spec names the nodes' store
// with object_store.store, its paths are s3://bucket/key.)
func TestDatasetFilesChanged(t *testing.T) {
	t.Cleanup(objstore.CloseIdleConnections)
	srv := s3test.StartT(t)
	s3test.SetCredentials(t)
	ctx := context.Background()
	if err := srv.MakeBucket(ctx, "train"); err != nil {
		t.Fatal(err)
	}
	put := func(s int) {
		var b bytes.Buffer
		if err := pqshard.Write(&b, int64(s*100), 100, 100, 8); err != nil {
			t.Fatal(err)
		}
		if err := srv.Put(ctx, "train", fmt.Sprintf("c/shard-%05d.parquet", s), b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	put(1)
	spec := pipeline.NewSpec(pipeline.Source{Files: &pipeline.FilesSource{
		Paths: []string{"s3://train/c/*.parquet"}, Format: "parquet", Columns: []string{"id"},
		ObjectStore: &pipeline.ObjectStoreOptions{Store: "lake"},
	}}).Batch(10, false)
	c := testcluster.Start(t, 1, withStore(srv.NamedStore("lake")))
	cl := jobtest.Dial(t, c, 0)
	read := func(name string) (int, error) {
		it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
		if err != nil {
			return 0, err
		}
		defer it.Close()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rows := 0
		for {
			b, err := it.Next(rctx)
			if errors.Is(err, io.EOF) {
				return rows, nil
			}
			if err != nil {
				return rows, err
			}
			id, _ := b.Get("id")
			rows += int(id.Shape[0])
		}
	}
	if n, err := read("first"); n != 200 || err != nil {
		t.Fatalf("first job: %d rows, %v", n, err)
	}
	put(2)
	n, err := read("second")
	if err == nil || !strings.Contains(err.Error(), "had 2 splits when it was registered, this worker lists 3") {
		t.Fatalf("second job after an object was added: %d rows, %v", n, err)
	}
	t.Log(err)
}

// withStore configures a named object store on every node.
func withStore(s objstore.NamedStore) testcluster.Option {
	return testcluster.WithConfig(func(_ int, c *mesh.Config) { c.ObjectStores = append(c.ObjectStores, s) })
}
