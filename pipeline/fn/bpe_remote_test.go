package fn

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/internal/s3test"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// TestTokenizeBPEFromS3 loads GPT-2's tokenizer.json.gz from a real
// S3-compatible server (versitygw on loopback), reached through the
// environment as a user's own process reaches it (objstore.Local; a node
// reaches it through a named store): same ids as the golden files, loaded
// once per object version, a missing object named.
func TestTokenizeBPEFromS3(t *testing.T) {
	srv := s3test.StartT(t)
	s3test.SetCredentials(t)
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Cleanup(objstore.CloseIdleConnections)
	ctx := context.Background()
	if err := srv.MakeBucket(ctx, "tokenizers"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(gpt2Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Put(ctx, "tokenizers", "gpt2/tokenizer.json.gz", b); err != nil {
		t.Fatal(err)
	}
	const url = "s3://tokenizers/gpt2/tokenizer.json.gz"
	f := mustMap(t, "tokenize_bpe", Args{"tokenizer": url})
	for _, c := range readGolden(t)[:100] {
		e, err := f(&FnContext{}, text(c.Text))
		if err != nil {
			t.Fatalf("%q: %v", c.Text, err)
		}
		if got := int32s(t, e, "tokens"); !reflect.DeepEqual(got, append([]int32{}, c.IDs...)) {
			t.Fatalf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	m1, err1 := loadCached(url, "", loadHFTokenizer)
	m2, err2 := loadCached(url, "", loadHFTokenizer)
	if err1 != nil || err2 != nil || m1 != m2 {
		t.Fatalf("loaded twice, or failed: %v, %v", err1, err2)
	}
	_, err = loadCached("s3://tokenizers/llama/tokenizer.json", "", loadHFTokenizer)
	if !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "s3://tokenizers/llama/tokenizer.json") {
		t.Fatalf("missing tokenizer: %v", err)
	}
}
