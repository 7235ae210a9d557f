package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// httpFixture serves objects over https with net/http's ServeContent
// (ranges, ETags, If-Match), as a static file server or CDN does.
type httpFixture struct {
	*httptest.Server
	mu       sync.Mutex
	objects  map[string][]byte
	etags    map[string]string
	fail503  atomic.Int32 // GETs left to fail with 503
	noRanges bool
}

func newHTTPFixture(t *testing.T) *httpFixture {
	f := &httpFixture{objects: map[string][]byte{}, etags: map[string]string{}}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && f.fail503.Add(-1) >= 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		f.mu.Lock()
		b, ok := f.objects[r.URL.Path]
		etag := f.etags[r.URL.Path]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if f.noRanges {
			r.Header.Del("Range")
		}
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	// Handshakes cut by the test's CloseIdleConnections are not news.
	f.Server.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.Server.StartTLS()
	t.Cleanup(f.Close)
	return f
}

func (f *httpFixture) put(path string, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[path] = b
	f.etags[path] = fmt.Sprintf(`"v%d"`, len(f.etags)+len(f.objects)+len(b)+int(b[0]))
}

func (f *httpFixture) store(t *testing.T) *objstore.Store {
	s := objstore.New(objstore.Config{Transport: f.Client().Transport, ChunkBytes: 1000, ReadAheadChunks: 2, RetryBaseDelay: time.Millisecond})
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func TestHTTPRangeReads(t *testing.T) {
	f := newHTTPFixture(t)
	want := bytes.Repeat([]byte("0123456789abcdefghij"), 501)
	f.put("/d/shard-0.tar", want)
	s := f.store(t)
	ctx := context.Background()
	url := f.URL + "/d/shard-0.tar"

	f.fail503.Store(3) // retried
	file, err := s.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(file, 0, file.Size()))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if n := f.fail503.Load(); n >= 0 {
		t.Fatalf("the 503s were not all sent: %d left", n)
	}
	// Replaced while open: the next range request fails its If-Match.
	f.put("/d/shard-0.tar", append([]byte("X"), want[1:]...))
	_, err = file.ReadAt(make([]byte, 10), 50) // chunk 0, evicted by the read to the end
	file.Close()
	if !errors.Is(err, objstore.ErrVanished) || !strings.Contains(err.Error(), url) {
		t.Errorf("replaced object: %v", err)
	}

	if _, err := s.Open(ctx, f.URL+"/d/missing.tar"); !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "/d/missing.tar") {
		t.Errorf("missing: %v", err)
	}
	if _, err := s.Glob(ctx, f.URL+"/d/*.tar"); err == nil || !strings.Contains(err.Error(), "cannot be globbed") {
		t.Errorf("glob of https: %v", err)
	}

	// A server that ignores Range would send whole objects per chunk.
	f.noRanges = true
	file, err = s.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.ReadAt(make([]byte, 10), 0); err == nil || !strings.Contains(err.Error(), "range requests are required") {
		t.Errorf("server without ranges: %v", err)
	}
}
