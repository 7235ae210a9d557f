package mesh_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// mtlsCluster is a cluster of n nodes under mutual TLS, with its PKI.
func mtlsCluster(t *testing.T, n int) (*testcluster.Cluster, *testPKI) {
	t.Helper()
	return mtlsClusterWith(t, n, nil)
}

// mtlsClusterWith is mtlsCluster with more of each node's config set by
// f (nil: none).
func mtlsClusterWith(t testing.TB, n int, f func(i int, cfg *mesh.Config)) (*testcluster.Cluster, *testPKI) {
	t.Helper()
	p := newTestPKI(t)
	certs := map[int][2]string{}
	for i := range n {
		crt, key := p.issue(t, transport.RoleNode, nodeName(i))
		certs[i] = [2]string{crt, key}
	}
	c := testcluster.Start(t, n, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = p.caFile, certs[i][0], certs[i][1]
		if f != nil {
			f(i, cfg)
		}
	}))
	c.WaitLeader(t, 20*time.Second)
	return c, p
}

// TestWorkerRequestsInAnotherName (issue 36): under mutual TLS a worker's
// request names its worker, and only that node may make it: a trainer's
// client certificate, or another node's, leasing, finishing or reporting
// in a node's name is refused (permission_denied); only a node may send a
// request marked forwarded (the leader trusts the forwarder's check); a
// client may not ask a node what it caches.
func TestWorkerRequestsInAnotherName(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	target := c.Node(0).Addr()
	victim := c.Name(1)
	codec, err := transport.NewCodec(transport.DefaultConfig().MaxHeaderBytes, transport.DefaultConfig().MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	trainerCert, trainerKey := p.issue(t, transport.RoleClient, "trainer")
	intruderCert, intruderKey := p.issue(t, transport.RoleNode, "node-09") // a node of the cluster, not the victim
	call := func(cert, key, method string, req any) error {
		t.Helper()
		tr, err := newStranger(t, p.caFile, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return transport.Call(ctx, tr, codec, target, method, req, nil)
	}
	for _, who := range []struct{ name, cert, key string }{{"a client certificate", trainerCert, trainerKey}, {"another node's certificate", intruderCert, intruderKey}} {
		for _, rc := range []struct {
			method string
			req    any
		}{
			{api.MethodLease, api.LeaseRequest{Job: "j", Worker: victim, N: 1}},
			{api.MethodFinish, api.FinishRequest{Job: "j", Worker: victim, Splits: []int64{0}}},
			{api.MethodProduce, api.ProduceRequest{Job: "j", Worker: victim}},
			{api.MethodHandBack, api.HandBackRequest{Job: "j", Worker: victim, Splits: []int64{0}}},
			{api.MethodDrained, api.DrainedRequest{Job: "j", Worker: victim}},
			{api.MethodEndTask, api.EndTaskRequest{Job: "j", Worker: victim, Failure: "forged"}},
		} {
			if err := call(who.cert, who.key, rc.method, rc.req); !errors.Is(err, transport.ErrPermissionDenied) {
				t.Errorf("%s: %s in %s's name answered %v, want permission_denied", who.name, rc.method, victim, err)
			}
		}
	}
	if err := call(trainerCert, trainerKey, api.MethodJobGet, api.JobRequest{Job: "j", Forwarded: true}); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a client's request marked forwarded answered %v, want permission_denied", err)
	}
	if err := call(trainerCert, trainerKey, api.MethodCacheHeld, api.CacheHeldRequest{Prefix: "ab"}); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a client asking what a node caches got %v, want permission_denied", err)
	}
	// The victim in its own name is not refused for who it is (the job
	// does not exist: not found).
	vc, vk := p.issue(t, transport.RoleNode, victim+"-x") // not the victim either
	if err := call(vc, vk, api.MethodLease, api.LeaseRequest{Job: "j", Worker: victim + "-x", N: 1}); errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a node leasing in its own name was refused: %v", err)
	}
}
