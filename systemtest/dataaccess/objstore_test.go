package dataaccess

import (
	"context"
	"errors"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/fxamacker/cbor/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// logger is an HTTP server that records the requests it gets (a
// "logging server" a hostile spec names as its S3 endpoint) and answers
// 403.
type logger struct {
	url  string
	mu   sync.Mutex
	auth []string
}

func startLogger(t *testing.T) *logger {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lg := &logger{url: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lg.mu.Lock()
		lg.auth = append(lg.auth, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Amz-Security-Token"))
		lg.mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return lg
}

// TestSpecChoosesNoEndpoint (issue 37 item 1, issue 36 item 3): a spec
// cannot send the nodes' object-store credentials to an endpoint of its
// choice. A spec naming an endpoint is refused, saying how to configure a
// named store, before any request leaves the node: the "logging server"
// it names gets nothing, neither the access key nor the session token.
// The check is the node's, not only the client library's: a hostile client
// sending the encoded spec itself is refused the same way.
func TestSpecChoosesNoEndpoint(t *testing.T) {
	const accessKey, token = "AKIAFEEDMESHTESTKEY1", "feedmesh-session-token-secret"
	t.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "feedmesh-test-secret-access-key")
	t.Setenv("AWS_SESSION_TOKEN", token)
	lg := startLogger(t)
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)

	spec := pipeline.NewSpec(pipeline.Source{Files: &pipeline.FilesSource{
		Paths: []string{"s3://bucket/key.parquet"}, Format: "parquet",
		ObjectStore: &pipeline.ObjectStoreOptions{Endpoint: lg.url, PathStyle: true},
	}})
	_, err := attempt(t, cl, spec)
	if err == nil || !strings.Contains(err.Error(), "--object-store") {
		t.Errorf("a spec naming an endpoint: %v, want a refusal saying how to configure a named store", err)
	}
	t.Logf("client: %v", err)

	// A hostile client encodes the spec itself.
	raw, err := hostileEncoding(spec)
	if err != nil {
		t.Fatal(err)
	}
	err = jobtest.RawCall(t, c.Node(0).Addr(), "job.distribute", distributeRequest("hostile", raw))
	if err == nil || !errors.Is(err, transport.ErrInvalid) || !strings.Contains(err.Error(), "--object-store") {
		t.Errorf("a hostile client's spec naming an endpoint: %v, want invalid_argument saying how to configure a named store", err)
	}
	t.Logf("node: %v", err)

	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, a := range lg.auth {
		if strings.Contains(a, accessKey) || strings.Contains(a, token) {
			t.Errorf("the node sent its credentials to the spec's endpoint: %s", a)
		}
	}
	if len(lg.auth) > 0 {
		t.Errorf("the spec's endpoint got %d requests, want none: %v", len(lg.auth), lg.auth)
	}
	_ = context.Background
}

// hostileEncoding encodes a spec as DistributeRequest carries it, without
// the client library's checks: what a hostile client sends.
func hostileEncoding(s *pipeline.Spec) ([]byte, error) {
	n, err := s.Normalized()
	if err != nil {
		return nil, err
	}
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		return nil, err
	}
	return em.Marshal(struct {
		Version int            `cbor:"feedmesh_spec"`
		Spec    *pipeline.Spec `cbor:"dataset"`
	}{1, n})
}

func distributeRequest(job string, spec []byte) api.DistributeRequest {
	o, err := client.NormalizeJobOptions(client.JobOptions{Name: job, Sharding: client.Dynamic, Offload: client.OffloadRemote})
	if err != nil {
		panic(err)
	}
	return api.DistributeRequest{Spec: spec, Options: o.Options(), Consumer: "0123456789abcdef"}
}
