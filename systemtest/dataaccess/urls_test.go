package dataaccess

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/testcluster"
)

// server is an HTTP server on a loopback address serving files by path
// (range requests, as the nodes make them) and redirects, counting the
// requests it gets.
type server struct {
	url  string // http://ip:port
	hits atomic.Int64
}

func serve(t *testing.T, ip string, files map[string]string, redirects map[string]string) *server {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	s := &server{url: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if to, ok := redirects[r.URL.Path]; ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Unix(1700000000, 0), strings.NewReader(body))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// TestURLSourcesOnlyToAllowedHosts (issue 37, item 1): http(s) sources
// reach only the hosts the node allows. A service on another loopback
// address (an internal service holding secrets), reached directly or by a
// 302 from an allowed server, is refused: the redirect at the hop, before
// any request reaches the internal service. An allowed host name that
// resolves to a loopback address (what DNS rebinding does to a name) is
// refused too: loopback, link-local and private addresses must be allowed
// by address. The cloud metadata address is refused without a request.
// Tokenizer URLs follow the same rule. The allowed server's files are read.
func TestURLSourcesOnlyToAllowedHosts(t *testing.T) {
	sec := secret(t)
	internal := serve(t, "127.0.0.2", map[string]string{"/secret": sec}, nil)
	public := serve(t, "127.0.0.1", map[string]string{"/data.txt": "public\ndata\n"},
		map[string]string{"/moved": internal.url + "/secret"})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(public.url, "http://"))

	// Node 0 allows the public server's address; node 1 allows the name
	// localhost only.
	c := testcluster.Start(t, 1, dataAccess(nil, []string{"127.0.0.1/32"}))
	cl := jobtest.Dial(t, c, 0)
	got, err := attempt(t, cl, lines(public.url+"/data.txt"))
	if err != nil || !bytes.Contains(got, []byte("public")) {
		t.Fatalf("allowed host: %q, %v", got, err)
	}
	r := newRefusals(t, internal.url, "127.0.0.2", "302", "moved")
	for _, a := range []struct{ what, url string }{
		{"an internal service", internal.url + "/secret"},
		{"a redirect to an internal service", public.url + "/moved"},
		{"the cloud metadata address", "http://169.254.169.254/latest/meta-data/iam/security-credentials/"},
		{"a private address", "http://10.255.255.1/x"},
	} {
		got, err := attempt(t, cl, wholeFile(a.url))
		r.refused(a.what, a.url, sec, got, err)
		spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 10})).
			Map("tokenize_bpe", fn.Args{"tokenizer": a.url}, 1)
		got, err = attempt(t, cl, spec)
		r.refused("tokenizer: "+a.what, a.url, sec, got, err)
	}
	if n := internal.hits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests, want none (the redirect must be refused at the hop)", n)
	}

	byName := testcluster.Start(t, 1, dataAccess(nil, []string{"localhost"}))
	cl2 := jobtest.Dial(t, byName, 0)
	u := fmt.Sprintf("http://localhost:%s/data.txt", port)
	got, err = attempt(t, cl2, wholeFile(u))
	r.refused("an allowed name resolving to loopback", u, "", got, err)
	r.oneForm()
}
