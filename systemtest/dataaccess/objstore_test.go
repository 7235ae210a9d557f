package dataaccess

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/fxamacker/cbor/v2"
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

// TestSpecChoosesNoEndpoint (issue 37 item 1; issue 36 item 6, what a
// node holds stays in it): a spec cannot send the nodes' object-store
// credentials to an endpoint of its choice. A spec naming an endpoint is refused, saying how to configure a
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

// TestNodesReadOnlyNamedStores (issue 37 item 1): a node reads s3://
// objects only of the stores its operator named, never the S3 its
// environment points at: with AWS_ENDPOINT_URL and the AWS keys set in
// the node's environment (a "logging server" as the endpoint), a spec's
// s3://bucket/key whose first segment names no store, and a spec naming
// a store the node does not have, are both answered with the generic
// permission_denied "not allowed", and the server gets no request.
func TestNodesReadOnlyNamedStores(t *testing.T) {
	const accessKey = "AKIAFEEDMESHTESTKEY2"
	lg := startLogger(t)
	t.Setenv("AWS_ENDPOINT_URL", lg.url)
	t.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "feedmesh-test-secret-access-key")
	other := startLogger(t) // the one store the node has
	c := testcluster.Start(t, 1, dataAccess(nil, nil, objstore.NamedStore{Name: "lake", Endpoint: other.url, Region: "us-east-1", PathStyle: true}))
	cl := jobtest.Dial(t, c, 0)
	r := newRefusals(t, lg.url, "lake", "store")
	for _, a := range []struct {
		what, path, store string
	}{
		{"a bucket of the environment's S3", "s3://bucket/key.parquet", ""},
		{"a glob in the environment's S3", "s3://bucket/*.parquet", ""},
		{"a store the node does not have", "s3://nosuch/bucket/key.parquet", ""},
		{"object_store.store the node does not have", "s3://bucket/key.parquet", "nosuch"},
	} {
		fs := &pipeline.FilesSource{Paths: []string{a.path}, Format: "parquet"}
		if a.store != "" {
			fs.ObjectStore = &pipeline.ObjectStoreOptions{Store: a.store}
		}
		got, err := attempt(t, cl, pipeline.NewSpec(pipeline.Source{Files: fs}))
		r.refused(a.what, a.path, "", got, err)
	}
	r.oneForm()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.auth) > 0 {
		t.Errorf("the environment's S3 endpoint got %d requests, want none: %v", len(lg.auth), lg.auth)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if len(other.auth) > 0 {
		t.Errorf("the named store got %d requests for specs that did not name it: %v", len(other.auth), other.auth)
	}
}
