package mesh_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// issueClient makes a client certificate of tenant (and an
// administrator's if admin).
func (p *testPKI) issueClient(t testing.TB, name, tenant string, admin bool) (certFile, keyFile string) {
	t.Helper()
	c, k, err := p.ca.Issue(transport.Identity{Role: transport.RoleClient, Name: name, Tenant: tenant, Admin: admin}, transport.CertOptions{ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = p.dir+"/client-"+name+".crt", p.dir+"/client-"+name+".key"
	if err := transport.WriteNewFiles(transport.OutputFile{Path: certFile, Data: c, Mode: 0o644}, transport.OutputFile{Path: keyFile, Data: k, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// tenantClient calls a node of an mTLS cluster with one client
// certificate.
type tenantClient struct {
	t     testing.TB
	tr    *transport.Transport
	codec *transport.Codec
	token string // sent with every call and stream, if set
}

func newTenantClient(t testing.TB, p *testPKI, name, tenant string, admin bool) *tenantClient {
	t.Helper()
	cert, key := p.issueClient(t, name, tenant, admin)
	tr, err := newStranger(t, p.caFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	codec, err := transport.NewCodec(transport.DefaultConfig().MaxHeaderBytes, transport.DefaultConfig().MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	return &tenantClient{t: t, tr: tr, codec: codec}
}

// firstBatch opens a data stream of job (id) at the worker at addr as
// consumer, with capability, and reads its first batch: nil if one came.
func (c *tenantClient) firstBatch(addr, job string, id uint64, consumer string, capability []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := batch.Open(ctx, c.tr, c.codec, addr, batch.OpenRequest{Job: job, Consumer: consumer, Window: 2, JobID: id, Token: c.token, Capability: capability}, batch.DefaultLimits())
	if err != nil {
		return err
	}
	defer r.Close()
	_, _, err = r.Next(ctx)
	return err
}

func (c *tenantClient) call(addr, method string, req, resp any) error {
	ctx, cancel := context.WithTimeout(transport.WithToken(context.Background(), c.token), 15*time.Second)
	defer cancel()
	return transport.Call(ctx, c.tr, c.codec, addr, method, req, resp)
}

// TestTenantQuotaAndDatasetGC (issue 37, item 4): datasets were never
// freed and bounded only cluster-wide, so one tenant registering specs
// (4,100 of them) locked every tenant out for good; kv.put was open to
// anyone and unbounded. Now a tenant at its limit of datasets (lowered
// here to 3) gets a clear quota error while another tenant keeps
// working; once its jobs are gone, the leader removes the datasets no job
// reads and the tenant registers again; the KV store is refused to
// tenants and open to an administrator.
func TestTenantQuotaAndDatasetGC(t *testing.T) {
	c, p := mtlsClusterWith(t, 3, func(_ int, cfg *mesh.Config) {
		cfg.Tenants.MaxDatasets = 3
		cfg.Tenants.DatasetGCAfter = 300 * time.Millisecond
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	ops := newTenantClient(t, p, "ops", "", true)

	distribute := func(who *tenantClient, job string, seed uint64) error {
		spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: seed, SplitSize: 50})).CanonicalEncoding()
		if err != nil {
			t.Fatal(err)
		}
		opts := api.JobOptions{Name: job, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers, GCAfter: 100 * time.Millisecond}
		return who.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, nil)
	}
	for i := range 3 {
		if err := distribute(bob, fmt.Sprintf("bob-%d", i), uint64(10+i)); err != nil {
			t.Fatalf("bob's dataset %d of 3: %v", i+1, err)
		}
	}
	err := distribute(bob, "bob-3", 13)
	if !errors.Is(err, api.ErrQuota) || !strings.Contains(err.Error(), "tenant-max-datasets") {
		t.Fatalf("bob's 4th dataset: %v, want quota_exceeded naming --tenant-max-datasets", err)
	}
	if err := distribute(alice, "alice-0", 20); err != nil {
		t.Errorf("alice, another tenant, while bob is at his limit: %v", err)
	}
	// Bob's jobs end; their datasets, read by no job, are removed.
	for i := range 3 {
		if err := bob.call(addr, api.MethodDetach, api.JobRequest{Job: fmt.Sprintf("bob-%d", i), Consumer: "c0"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(t, 30*time.Second, "bob registers again once his unread datasets are collected", func() bool {
		return distribute(bob, "bob-3", 13) == nil
	})
	if got := c.Node(li).Raft().TenantUsage("vision"); got.Datasets != 1 {
		t.Errorf("alice's dataset, read by her job, was collected too: %+v", got)
	}

	// The KV store: an administrator's, not a tenant's.
	put := api.PutRequest{Key: "k", Value: make([]byte, 1<<20)}
	if err := bob.call(addr, api.MethodPut, put, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a tenant's kv.put: %v, want permission_denied", err)
	}
	if err := bob.call(addr, api.MethodGet, api.GetRequest{Key: "k", Stale: true}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a tenant's stale kv.get: %v, want permission_denied", err)
	}
	if err := ops.call(addr, api.MethodPut, api.PutRequest{Key: "k", Value: []byte("v")}, nil); err != nil {
		t.Errorf("an administrator's kv.put: %v", err)
	}
}

// syncBuffer is a log sink several nodes write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTenantSeesItsOwnJobs (issue 37, item 6): `feedmesh jobs` listed
// every tenant's jobs, consumers and workers, and any worker answered
// its per-op statistics of any job. Now a principal sees its tenant's
// jobs only, by their short names (an administrator every one, by
// their internal names "@tenant/name"), a worker answers a request
// naming another tenant's job with permission_denied and leaves its
// tasks out of a full answer, and the leader logs every control action
// with its principal, tenant, job (internal name) and outcome.
func TestTenantSeesItsOwnJobs(t *testing.T) {
	logs := make([]*syncBuffer, 3)
	for i := range logs {
		logs[i] = &syncBuffer{}
	}
	c, p := mtlsClusterWith(t, 3, func(i int, cfg *mesh.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	carol := newTenantClient(t, p, "carol", "", false)
	ops := newTenantClient(t, p, "ops", "", true)
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: 1, SplitSize: 50})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	caps := map[string][]byte{}
	for _, j := range []struct {
		who  *tenantClient
		name string
	}{{alice, "vision-a"}, {bob, "nlp-b"}} {
		opts := api.JobOptions{Name: j.name, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
		var info api.JobInfo
		if err := j.who.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, &info); err != nil {
			t.Fatal(err)
		}
		caps[j.name] = info.Capability
	}
	names := func(who *tenantClient) []string {
		var out []api.JobInfo
		if err := who.call(addr, api.MethodJobs, api.JobRequest{}, &out); err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, j := range out {
			ns = append(ns, j.Name)
		}
		slices.Sort(ns)
		return ns
	}
	for _, tc := range []struct {
		who  string
		c    *tenantClient
		want []string
	}{{"alice", alice, []string{"vision-a"}}, {"bob", bob, []string{"nlp-b"}}, {"carol (default tenant)", carol, nil}, {"an administrator", ops, []string{"@nlp/nlp-b", "@vision/vision-a"}}} {
		if got := names(tc.c); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists jobs %v, want %v", tc.who, got, tc.want)
		}
	}
	// A worker's statistics: alice reads from the node asked, which
	// starts her job's task there.
	if err := alice.firstBatch(addr, "vision-a", 0, "c0", caps["vision-a"]); err != nil {
		t.Fatalf("alice reads a batch of her job: %v", err)
	}
	var all api.WorkerOpStats
	if err := ops.call(addr, api.MethodOpStats, api.OpStatsRequest{}, &all); err != nil || !slices.ContainsFunc(all.Tasks, func(t api.TaskOpStats) bool { return t.Job == "@vision/vision-a" }) {
		t.Fatalf("an administrator's statistics of the node hold no task of alice's job: %+v %v", all.Tasks, err)
	}
	var mine api.WorkerOpStats
	if err := alice.call(addr, api.MethodOpStats, api.OpStatsRequest{Job: "vision-a"}, &mine); err != nil || len(mine.Tasks) != 1 || mine.Tasks[0].Job != "vision-a" {
		t.Errorf("alice's statistics of her job: %+v %v, want its task, named vision-a", mine.Tasks, err)
	}
	if err := bob.call(addr, api.MethodOpStats, api.OpStatsRequest{Job: "@vision/vision-a"}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("bob asks a worker for alice's job's statistics: %v, want permission_denied", err)
	}
	var st api.WorkerOpStats
	for _, job := range []string{"", "vision-a"} { // all, and his own (no) job of that name
		if err := bob.call(addr, api.MethodOpStats, api.OpStatsRequest{Job: job}, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Tasks) != 0 {
			t.Errorf("bob's statistics answer (job %q) holds tasks %+v, want none (his job has no task there)", job, st.Tasks)
		}
	}
	if err := bob.call(addr, api.MethodShareStats, api.ShareStatsRequest{Job: "@vision/vision-a"}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("bob asks a worker for alice's job's sharing counters: %v, want permission_denied", err)
	}
	// The audit log, on the leader.
	if err := bob.call(addr, api.MethodDetach, api.JobRequest{Job: "@vision/vision-a", Consumer: "a0"}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Fatalf("bob detaches alice's consumer: %v", err)
	}
	lines := strings.Split(logs[li].String(), "\n")
	for _, want := range [][]string{
		{"msg=audit", "method=job.distribute", "principal=spiffe://prod/client/alice", "tenant=vision", "job=@vision/vision-a", "outcome=ok"},
		{"msg=audit", "method=job.detach", "principal=spiffe://prod/client/bob", "tenant=nlp", "job=@nlp/@vision/vision-a", "outcome=denied"},
		{"msg=audit", "method=jobs.list", "principal=spiffe://prod/client/ops", "admin=true", "outcome=ok"},
	} {
		if !slices.ContainsFunc(lines, func(l string) bool {
			for _, w := range want {
				if !strings.Contains(l, w) {
					return false
				}
			}
			return true
		}) {
			t.Errorf("the leader's log has no line with %q", want)
		}
	}
}

// TestTenantQuotaConsumersAndNodes (issue 37, item 4): a tenant's
// consumers together, and the nodes one of its jobs may take, are
// bounded (lowered here to 2 and 2): past them a consumer (attaching by
// distribute or by its first heartbeat) and a job asking for more nodes
// are refused with quota_exceeded naming the bound, while another tenant
// and an administrator go on.
func TestTenantQuotaConsumersAndNodes(t *testing.T) {
	c, p := mtlsClusterWith(t, 3, func(_ int, cfg *mesh.Config) {
		cfg.Tenants.MaxConsumers = 2
		cfg.Tenants.MaxJobNodes = 2
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	ops := newTenantClient(t, p, "ops", "", true)
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: 1, SplitSize: 50})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	distribute := func(who *tenantClient, job, consumer string, o api.JobOptions) error {
		o.Name = job
		return who.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: o, Consumer: consumer}, nil)
	}
	two := api.JobOptions{Sharding: jobspec.Dynamic, MaxWorkers: 2}
	all := api.JobOptions{Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	if err := distribute(bob, "bob-all", "c0", all); !errors.Is(err, api.ErrQuota) || !strings.Contains(err.Error(), "tenant-max-job-nodes") {
		t.Errorf("bob's job on every node: %v, want quota_exceeded naming --tenant-max-job-nodes", err)
	}
	if err := distribute(ops, "ops-all", "c0", all); err != nil {
		t.Errorf("an administrator's job on every node: %v", err)
	}
	for _, consumer := range []string{"c0", "c1"} {
		if err := distribute(bob, "bob-two", consumer, two); err != nil {
			t.Fatalf("bob's consumer %s: %v", consumer, err)
		}
	}
	if err := distribute(bob, "bob-two", "c2", two); !errors.Is(err, api.ErrQuota) || !strings.Contains(err.Error(), "tenant-max-consumers") {
		t.Errorf("bob's third consumer: %v, want quota_exceeded naming --tenant-max-consumers", err)
	}
	if err := bob.call(addr, api.MethodHeartbeat, api.JobRequest{Job: "bob-two", Consumer: "c3"}, nil); !errors.Is(err, api.ErrQuota) {
		t.Errorf("bob's third consumer attaching by heartbeat: %v, want quota_exceeded", err)
	}
	if err := bob.call(addr, api.MethodHeartbeat, api.JobRequest{Job: "bob-two", Consumer: "c1"}, nil); err != nil {
		t.Errorf("bob's attached consumer renews: %v", err)
	}
	if err := distribute(alice, "alice-two", "c0", two); err != nil {
		t.Errorf("alice, another tenant: %v", err)
	}
}

// BenchmarkTenantAuthorization: what the tenant checks cost a control
// round trip, through a follower under mutual TLS: a tenant's client
// (the job's owner checked, its consumer looked up, its quotas counted
// on a distribute) against an administrator's (none of it), on one
// cluster, their calls alternating so that both see the same load.
// heartbeat renews a consumer; distribute joins its job again (its
// CreateJob and AttachConsumer applied through Raft). Reports each
// one's mean latency and tenant/admin, the ratio.
func BenchmarkTenantAuthorization(b *testing.B) {
	for _, method := range []string{"heartbeat", "distribute"} {
		b.Run(method, func(b *testing.B) { benchAuthz(b, method) })
	}
}

func benchAuthz(b *testing.B, method string) {
	c, p := mtlsClusterWith(b, 3, nil)
	li, _ := c.WaitLeader(b, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: 1, SplitSize: 50})).CanonicalEncoding()
	if err != nil {
		b.Fatal(err)
	}
	type side struct {
		cl  *tenantClient
		req api.DistributeRequest
		d   time.Duration
	}
	sides := []*side{
		{cl: newTenantClient(b, p, "ops", "", true)},
		{cl: newTenantClient(b, p, "alice", "vision", false)},
	}
	for i, s := range sides {
		s.req = api.DistributeRequest{Spec: spec, Options: api.JobOptions{Name: fmt.Sprintf("j%d", i), Sharding: jobspec.Dynamic, MaxWorkers: 2}, Consumer: "c0"}
		if err := s.cl.call(addr, api.MethodDistribute, s.req, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		for _, s := range sides {
			start := time.Now()
			var err error
			switch method {
			case "heartbeat":
				err = s.cl.call(addr, api.MethodHeartbeat, api.JobRequest{Job: s.req.Options.Name, Consumer: "c0"}, nil)
			default:
				err = s.cl.call(addr, api.MethodDistribute, s.req, nil)
			}
			s.d += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	admin, tenant := float64(sides[0].d)/float64(b.N), float64(sides[1].d)/float64(b.N)
	b.ReportMetric(admin, "admin-ns/call")
	b.ReportMetric(tenant, "tenant-ns/call")
	b.ReportMetric(tenant/admin, "tenant/admin")
}

// withToken is c sending token.
func (c *tenantClient) withToken(token string) *tenantClient {
	d := *c
	d.token = token
	return &d
}

// TestTokens (issue 37, item 2): an administrator creates an access
// token of a tenant; whoever holds it acts as that tenant's principal,
// whatever certificate it connects with, on the control plane (through
// any node) and on the data plane; the cluster keeps the secret's hash
// only; a wrong or revoked token is refused, and only administrators
// create or revoke tokens.
func TestTokens(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	follower := c.Node((li + 1) % 3).Addr()
	ops := newTenantClient(t, p, "ops", "", true)
	alice := newTenantClient(t, p, "alice", "vision", false)
	carol := newTenantClient(t, p, "carol", "", false) // the default tenant's certificate, shared by teams

	if err := alice.call(follower, api.MethodTokenCreate, api.TokenCreateRequest{ID: "mine", Tenant: "nlp"}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a tenant creates a token: %v, want permission_denied", err)
	}
	var created api.TokenCreateResponse
	if err := ops.call(follower, api.MethodTokenCreate, api.TokenCreateRequest{ID: "vision-ci", Tenant: "vision", Hash: make([]byte, 32)}, &created); err != nil {
		t.Fatal(err)
	}
	id, secret, ok := strings.Cut(created.Token, ".")
	if !ok || id != "vision-ci" || len(secret) < 40 {
		t.Fatalf("token %q: want vision-ci.<secret>", created.Token)
	}
	rec, ok := c.Node(li).Raft().Token("vision-ci")
	h := sha256.Sum256([]byte(secret))
	if !ok || !bytes.Equal(rec.Hash, h[:]) || rec.Tenant != "vision" || rec.CreatedBy != "spiffe://prod/client/ops" {
		t.Fatalf("the leader's record of the token: %+v (found %v), want the secret's SHA-256 (not the hash the client sent), tenant vision, created by ops", rec, ok)
	}
	ci := carol.withToken(created.Token)
	// Every node knows the token once it has applied it.
	c.WaitFor(t, 10*time.Second, "the token works through every node", func() bool {
		for i := range 3 {
			if ci.call(c.Node(i).Addr(), api.MethodJobs, api.JobRequest{}, nil) != nil {
				return false
			}
		}
		return true
	})
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: 1, SplitSize: 50})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	var info api.JobInfo
	opts := api.JobOptions{Name: "ci-job", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	if err := ci.call(follower, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, &info); err != nil {
		t.Fatalf("the token's holder creates a job: %v", err)
	}
	if info.Tenant != "vision" || info.Owner != "token:vision-ci" {
		t.Errorf("the token's job: tenant %q, owner %q; want vision, token:vision-ci", info.Tenant, info.Owner)
	}
	if err := alice.call(follower, api.MethodJobGet, api.JobRequest{Job: "ci-job"}, nil); err != nil {
		t.Errorf("alice, of the token's tenant, reads the job: %v", err)
	}
	if err := carol.call(follower, api.MethodJobGet, api.JobRequest{Job: "ci-job"}, nil); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("the certificate without the token reads the job: %v, want not_found (as a job that does not exist)", err)
	}
	if err := ci.firstBatch(follower, "ci-job", info.ID, "c0", info.Capability); err != nil {
		t.Errorf("the token's holder reads a batch: %v", err)
	}
	// Without the token, carol's "ci-job" is the default tenant's, no job.
	if err := carol.firstBatch(follower, "ci-job", info.ID, "c0", info.Capability); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("the certificate without the token reads a batch: %v, want not found", err)
	}
	if err := carol.firstBatch(follower, "@vision/ci-job", info.ID, "c0", info.Capability); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("the certificate without the token reads a batch by the job's internal name: %v, want permission denied", err)
	}
	wrong := carol.withToken("vision-ci." + strings.Repeat("A", len(secret)))
	if err := wrong.call(follower, api.MethodJobs, api.JobRequest{}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("a wrong secret: %v, want permission_denied", err)
	}
	if err := wrong.firstBatch(follower, "ci-job", info.ID, "c0", info.Capability); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a wrong secret reads a batch: %v, want permission denied", err)
	}
	if err := ci.call(follower, api.MethodTokenRevoke, api.TokenRevokeRequest{ID: "vision-ci"}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("the token's holder revokes it: %v, want permission_denied", err)
	}
	if err := ops.call(follower, api.MethodTokenRevoke, api.TokenRevokeRequest{ID: "vision-ci"}, nil); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 10*time.Second, "the revoked token refused through every node", func() bool {
		for i := range 3 {
			if err := ci.call(c.Node(i).Addr(), api.MethodJobs, api.JobRequest{}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
				return false
			}
		}
		return true
	})
}
