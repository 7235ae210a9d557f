package s3test_test

import (
	"context"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/feedmesh/feedmesh/internal/s3test"
)

// TestServer builds (or finds) versitygw and serves an object. CI runs it
// first, alone, so that a first build on a new machine is not timed with
// the tests that use the server.
func TestServer(t *testing.T) {
	srv := s3test.StartT(t)
	ctx := context.Background()
	if err := srv.MakeBucket(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Put(ctx, "smoke", "dir/x.bin", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	o, err := srv.Client.GetObject(ctx, "smoke", "dir/x.bin", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}
	bin, err := s3test.Binary(ctx)
	t.Logf("versitygw: %s (%v), endpoint %s", bin, err, srv.Endpoint)
}
