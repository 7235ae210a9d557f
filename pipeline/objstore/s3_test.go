package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/s3test"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// These tests run against versitygw, a real S3-compatible server, on
// loopback (internal/s3test builds it once per machine from the Go module
// proxy). Faults are injected by a reverse proxy in front of it.

// faultProxy forwards to the server, counting GETs and failing those that
// fail says to fail with an S3 SlowDown (503).
type faultProxy struct {
	*httptest.Server
	mu     sync.Mutex
	gets   int      // GETs seen (ranges and listings)
	ranges []string // Range headers of the object GETs forwarded
	failed int
	// fail says whether to fail a GET: n is how many times the same
	// request (URL and range) came before.
	fail  func(n int) bool
	tries map[string]int
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{tries: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			p.mu.Lock()
			key := r.URL.String() + " " + r.Header.Get("Range")
			n := p.tries[key]
			p.tries[key]++
			p.gets++
			fail := p.fail != nil && p.fail(n)
			if fail {
				p.failed++
			} else if rg := r.Header.Get("Range"); rg != "" {
				p.ranges = append(p.ranges, rg)
			}
			p.mu.Unlock()
			if fail {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *faultProxy) counts() (gets, failed int, ranges []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets, p.failed, slices.Clone(p.ranges)
}

// fixture is a server with a bucket of objects.
type fixture struct {
	srv  *s3test.Server
	data map[string][]byte // key → contents, in bucket "data"
}

func startFixture(t *testing.T) *fixture {
	t.Helper()
	srv := s3test.StartT(t)
	s3test.SetCredentials(t)
	ctx := context.Background()
	if err := srv.MakeBucket(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, data: map[string][]byte{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []string{"shards/a.parquet", "shards/b.parquet", "shards/sub/c.parquet", "shards/notes.txt", "other/d.parquet", "big.bin"} {
		n := 1000 + rng.IntN(1000)
		if k == "big.bin" {
			n = 300<<10 + 17 // not a whole number of chunks
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if err := srv.Put(ctx, "data", k, b); err != nil {
			t.Fatal(err)
		}
		f.data[k] = b
	}
	return f
}

// store returns a Store of its own (not For's: each test's environment
// and faults differ) reaching endpoint, with small chunks and fast retries.
func (f *fixture) store(t *testing.T, endpoint string, edit func(*objstore.Config)) *objstore.Store {
	cfg := f.srv.Config()
	cfg.Endpoint = endpoint
	cfg.ChunkBytes = 64 << 10
	cfg.ReadAheadChunks = 2
	cfg.RetryBaseDelay = time.Millisecond
	cfg.RetryMaxDelay = 5 * time.Millisecond
	if edit != nil {
		edit(&cfg)
	}
	s := objstore.New(cfg)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func TestS3GlobAndMissing(t *testing.T) {
	f := startFixture(t)
	s := f.store(t, f.srv.Endpoint, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"s3://data/shards/*.parquet", []string{"s3://data/shards/a.parquet", "s3://data/shards/b.parquet"}},
		{"s3://data/shards/*/*.parquet", []string{"s3://data/shards/sub/c.parquet"}},
		{"s3://data/*/?.parquet", []string{"s3://data/other/d.parquet", "s3://data/shards/a.parquet", "s3://data/shards/b.parquet"}},
		{"s3://data/shards/[ab].parquet", []string{"s3://data/shards/a.parquet", "s3://data/shards/b.parquet"}},
		{"s3://data/big.bin", []string{"s3://data/big.bin"}},
	} {
		got, err := s.Glob(ctx, tc.pattern)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Glob(%s) = %v, %v; want %v", tc.pattern, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		pattern string
		want    error
		names   string
	}{
		{"s3://data/shards/*.tfrecord", objstore.ErrNoMatch, "s3://data/shards/*.tfrecord"},
		{"s3://nobucket/x/*.parquet", objstore.ErrNoBucket, "nobucket"},
		{"s3://data/shards/zzz.parquet", objstore.ErrNotFound, "s3://data/shards/zzz.parquet"},
		{"s3://nobucket/x.parquet", objstore.ErrNoBucket, "s3://nobucket/x.parquet"},
	} {
		_, err := s.Glob(ctx, tc.pattern)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("Glob(%s): %v; want %v naming %s", tc.pattern, err, tc.want, tc.names)
		}
	}
	if _, err := s.Open(ctx, "s3://nobucket/x.parquet"); !errors.Is(err, objstore.ErrNoBucket) {
		t.Errorf("open in a missing bucket: %v", err)
	}
}

// TestS3RangeReads reads an object by range requests through the chunk
// cache: every byte right, each chunk fetched once by a sequential read.
func TestS3RangeReads(t *testing.T) {
	f := startFixture(t)
	p := newFaultProxy(t, f.srv.Endpoint)
	s := f.store(t, p.URL, nil)
	ctx := context.Background()
	want := f.data["big.bin"]
	file, err := s.Open(ctx, "s3://data/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if file.Size() != int64(len(want)) {
		t.Fatalf("size %d, want %d", file.Size(), len(want))
	}
	// Sequential 4 KiB reads.
	var got []byte
	buf := make([]byte, 4096)
	for off := int64(0); ; {
		n, err := file.ReadAt(buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("sequential read: %d bytes differ from the object's %d", len(got), len(want))
	}
	_, _, ranges := p.counts()
	chunks := (len(want) + 64<<10 - 1) / (64 << 10)
	slices.Sort(ranges)
	if len(ranges) != chunks || len(slices.Compact(ranges)) != chunks {
		t.Errorf("sequential read sent %d range requests (%v), want one per chunk (%d)", len(ranges), ranges, chunks)
	}
	// Random reads, some across chunk boundaries.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		off := rng.Int64N(int64(len(want)))
		n := 1 + rng.IntN(100<<10)
		b := make([]byte, n)
		k, err := file.ReadAt(b, off)
		end := min(off+int64(n), int64(len(want)))
		if k != int(end-off) || !bytes.Equal(b[:k], want[off:end]) || (end < off+int64(n)) != (err == io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, k, err)
		}
	}
	// Whole ranges at once.
	rr := file.(objstore.RangeReader)
	rs := []objstore.Range{{Off: 0, N: 10}, {Off: 70000, N: 200000}, {Off: int64(len(want)) - 5, N: 5}}
	bufs, err := rr.ReadRanges(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if !bytes.Equal(bufs[i], want[r.Off:r.Off+r.N]) {
			t.Errorf("ReadRanges: range %d differs", i)
		}
	}
	if _, err := rr.ReadRanges(ctx, []objstore.Range{{Off: int64(len(want)) - 5, N: 6}}); err == nil || !strings.Contains(err.Error(), "s3://data/big.bin") {
		t.Errorf("range past the end: %v", err)
	}
}

// TestS3RetriesOn503 fails the first two tries of every GET with
// SlowDown: reads and listings succeed by retrying; without retries they
// fail, naming the object.
func TestS3RetriesOn503(t *testing.T) {
	f := startFixture(t)
	p := newFaultProxy(t, f.srv.Endpoint)
	p.fail = func(n int) bool { return n < 2 }
	s := f.store(t, p.URL, nil)
	ctx := context.Background()
	paths, err := s.Glob(ctx, "s3://data/shards/*.parquet")
	if err != nil || len(paths) != 2 {
		t.Fatalf("glob through 503s: %v, %v", paths, err)
	}
	file, err := s.Open(ctx, "s3://data/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(file, 0, file.Size()))
	file.Close()
	if err != nil || !bytes.Equal(got, f.data["big.bin"]) {
		t.Fatalf("read through 503s: %d bytes, %v", len(got), err)
	}
	gets, failed, _ := p.counts()
	if failed == 0 || failed < gets/2 {
		t.Fatalf("%d of %d GETs failed: the proxy did not inject", failed, gets)
	}
	t.Logf("%d GETs, %d answered 503 SlowDown", gets, failed)

	p.mu.Lock()
	clear(p.tries) // every request fails its first two tries again
	p.mu.Unlock()
	noRetry := f.store(t, p.URL, func(c *objstore.Config) { c.MaxRetries = -1 })
	file, err = noRetry.Open(ctx, "s3://data/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	_, err = io.ReadAll(io.NewSectionReader(file, 0, file.Size()))
	if err == nil || !strings.Contains(err.Error(), "s3://data/big.bin") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("without retries: %v; want a 503 naming the object", err)
	}
}

func TestS3CredentialsRefused(t *testing.T) {
	f := startFixture(t)
	ctx := context.Background()
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	s := f.store(t, f.srv.Endpoint, nil)
	if _, err := s.Glob(ctx, "s3://data/shards/*.parquet"); !errors.Is(err, objstore.ErrDenied) || !strings.Contains(err.Error(), "s3://data/shards/") || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("list with a wrong secret: %v", err)
	}
	if _, err := s.Open(ctx, "s3://data/big.bin"); !errors.Is(err, objstore.ErrDenied) || !strings.Contains(err.Error(), "s3://data/big.bin") {
		t.Errorf("open with a wrong secret: %v", err)
	}

	// The shared credentials file, when the environment has none.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	creds := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = x\naws_secret_access_key = y\n\n[feedmesh]\naws_access_key_id = "+s3test.AccessKey+"\naws_secret_access_key = "+s3test.SecretKey+"\n"), 0o600)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_PROFILE", "feedmesh")
	s = f.store(t, f.srv.Endpoint, nil)
	if _, err := s.Glob(ctx, "s3://data/shards/*.parquet"); err != nil {
		t.Errorf("credentials from %s, profile feedmesh: %v", creds, err)
	}
}

// TestS3ObjectVanishes deletes, then replaces, an object while a file
// reads it: the next range request is an error naming the object.
func TestS3ObjectVanishes(t *testing.T) {
	f := startFixture(t)
	ctx := context.Background()
	s := f.store(t, f.srv.Endpoint, func(c *objstore.Config) { c.ReadAheadChunks = 1 })
	for _, change := range []string{"deleted", "replaced"} {
		if err := f.srv.Put(ctx, "data", "big.bin", f.data["big.bin"]); err != nil {
			t.Fatal(err)
		}
		file, err := s.Open(ctx, "s3://data/big.bin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.ReadAt(make([]byte, 100), 0); err != nil {
			t.Fatal(err)
		}
		if change == "deleted" {
			err = f.srv.Delete(ctx, "data", "big.bin")
		} else {
			err = f.srv.Put(ctx, "data", "big.bin", bytes.Repeat([]byte{'x'}, len(f.data["big.bin"])))
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = file.ReadAt(make([]byte, 100), 250<<10) // beyond the read-ahead
		file.Close()
		if !errors.Is(err, objstore.ErrVanished) || !strings.Contains(err.Error(), "s3://data/big.bin") {
			t.Errorf("object %s while read: %v; want ErrVanished naming it", change, err)
		}
		t.Logf("%s: %v", change, err)
	}
}

func TestS3UnreachableEndpoint(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	endpoint := ln.URL
	ln.Close() // nothing listens there now
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	s := objstore.New(objstore.Config{Endpoint: endpoint, PathStyle: true, Region: "us-east-1", MaxRetries: 2, RetryBaseDelay: time.Millisecond})
	_, err := s.Open(context.Background(), "s3://data/x.parquet")
	if err == nil || !strings.Contains(err.Error(), "s3://data/x.parquet") || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "after 2 retries") {
		t.Fatalf("unreachable endpoint: %v", err)
	}
}
