package objstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// TestNarrowToGrant: a policy narrowed to a tenant's grant (mesh's
// --policy) reads only its granted roots, stores and hosts: root teamA's
// files, not teamB's (refused as any path outside the roots, whether it
// exists or not), relative paths under the first granted root; a host
// the node allows but the grant does not name is refused, at the first
// URL and at a redirect hop.
func TestNarrowToGrant(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	for dir, body := range map[string]string{dirA: "a", dirB: "b"} {
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, "http://localhost"+r.Host[len("127.0.0.1"):]+"/data", http.StatusFound)
			return
		}
		http.ServeContent(w, r, "data", time.Time{}, strings.NewReader("data"))
	}))
	defer srv.Close()
	a, err := objstore.NewAccess(objstore.AccessConfig{Roots: []string{"teamA=" + dirA, "teamB=" + dirB}, AllowHosts: []string{"127.0.0.1", "localhost", "127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.RootNames(); len(got) != 2 || got[0] != "teamA" || got[1] != "teamB" {
		t.Fatalf("root names %v", got)
	}
	ctx := context.Background()
	read := func(acc *objstore.Access, name string) (string, error) {
		f, err := acc.Open(ctx, name, objstore.Config{})
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
		return string(b), err
	}
	teamB := a.Narrow(objstore.Grant{Roots: []string{"teamB"}, Stores: []string{}, Hosts: []string{"127.0.0.1"}})
	defer teamB.Close() // a view: closes nothing
	for _, c := range []struct {
		name, want string
		denied     bool
	}{
		{filepath.Join(dirB, "f"), "b", false},
		{"f", "b", false}, // relative: under the first root granted
		{filepath.Join(dirA, "f"), "", true},
		{filepath.Join(dirA, "nonexistent"), "", true},
		{srv.URL + "/data", "data", false},
		{"http://localhost" + srv.URL[len("http://127.0.0.1"):] + "/data", "", true},
		{srv.URL + "/hop", "", true}, // a redirect to a host the grant does not name
		{"s3://lake/bucket/key", "", true},
	} {
		got, err := read(teamB, c.name)
		if c.denied != errors.Is(err, objstore.ErrNotAllowed) || !c.denied && (err != nil || got != c.want) {
			t.Errorf("%s: %q, %v; want %q, refused %v", c.name, got, err, c.want, c.denied)
		}
	}
	// The node's own policy still reads both roots, after the view's Close.
	if got, err := read(a, filepath.Join(dirA, "f")); err != nil || got != "a" {
		t.Errorf("the node's policy after a view closed: %q, %v", got, err)
	}
	if got, err := read(a, "http://localhost"+srv.URL[len("http://127.0.0.1"):]+"/data"); err != nil || got != "data" {
		t.Errorf("the node's policy, localhost: %q, %v", got, err)
	}
}
