package mesh_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
)

// dialAs connects a client (the real one, with its heartbeats, data
// streams and local worker) to addr with a client certificate of tenant.
func dialAs(t *testing.T, p *testPKI, addr, name, tenant string, admin bool) *client.Client {
	t.Helper()
	cert, key := p.issueClient(t, name, tenant, admin)
	tlsCfg, err := transport.ClientTLS(p.caFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, addr, client.Options{TLS: tlsCfg, Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatalf("%s dials %s: %v", name, addr, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestTwoTenantsOneJobName (issue 37, item 2: "job names are per
// tenant"): a job name was cluster-wide, so tenant nlp could not call its
// job "train" while tenant vision had one ("is another tenant's: choose
// another job name"). Now two tenants each create and read their own
// "train" at once, through different nodes, with the real client: each
// is told its job by the name it gave, reads exactly its own dataset's
// elements (exactly once), and lists only its own job; an administrator
// lists both, by their internal names "@vision/train" and "@nlp/train",
// and reads either by that name.
func TestTwoTenantsOneJobName(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	c.WaitLeader(t, 20*time.Second)
	alice := dialAs(t, p, c.Node(0).Addr(), "alice", "vision", false)
	bob := dialAs(t, p, c.Node(1).Addr(), "bob", "nlp", false)
	ops := dialAs(t, p, c.Node(2).Addr(), "ops", "", true)

	const n = 3000
	tenants := []struct {
		who   string
		cl    *client.Client
		start int64 // its dataset is [start, start+n)
	}{{"alice (vision)", alice, 0}, {"bob (nlp)", bob, 100000}}
	opts := client.JobOptions{Name: "train", Sharding: client.Dynamic, Delivery: client.ExactlyOnce, Workers: client.AllWorkers, Offload: client.OffloadRemote}
	its := make([]*client.Iterator, len(tenants))
	var wg sync.WaitGroup
	errs := make([]error, len(tenants))
	for i, tn := range tenants {
		wg.Add(1)
		go func() { // both create their "train" at once
			defer wg.Done()
			spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: tn.start, Stop: tn.start + n, SplitSize: 100}})
			spec.Batch(50, false)
			its[i], errs[i] = tn.cl.Distribute(context.Background(), spec, opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s creates its job train: %v", tenants[i].who, err)
		}
		defer its[i].Close()
		if its[i].Job() != "train" {
			t.Errorf("%s's job is named %q, want train", tenants[i].who, its[i].Job())
		}
	}
	ds := jobtest.CollectAll(t, its, nil, nil)
	for i, tn := range tenants {
		d := ds[i]
		if len(d.Counts) != n {
			t.Errorf("%s read %d distinct elements, want %d", tn.who, len(d.Counts), n)
		}
		for v, k := range d.Counts {
			if v < tn.start || v >= tn.start+n || k != 1 {
				t.Errorf("%s read element %d %d times: want each of [%d, %d) once, nothing else", tn.who, v, k, tn.start, tn.start+n)
				break
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listed := func(cl *client.Client) []string {
		t.Helper()
		js, err := cl.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.Tenant+" "+j.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		who  string
		cl   *client.Client
		want []string
	}{
		{"alice", alice, []string{"vision train"}},
		{"bob", bob, []string{"nlp train"}},
		{"an administrator", ops, []string{"nlp @nlp/train", "vision @vision/train"}},
	} {
		if got := listed(tc.cl); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists jobs %q, want %q", tc.who, got, tc.want)
		}
	}
	// The administrator addresses either by its internal name; a tenant
	// cannot.
	for _, name := range []string{"@vision/train", "@nlp/train"} {
		if info, err := ops.Job(ctx, name); err != nil || info.Name != name {
			t.Errorf("an administrator's job.get of %s: named %q, %v", name, info.Name, err)
		}
	}
	for _, tn := range tenants {
		if info, err := tn.cl.Job(ctx, "train"); err != nil || info.Name != "train" {
			t.Errorf("%s's job.get of train: named %q, %v", tn.who, info.Name, err)
		}
	}
	if _, err := bob.Distribute(ctx, jobtest.RangeSpec(10, 10, 5), client.JobOptions{Name: "@vision/train", Sharding: client.Dynamic, Offload: client.OffloadRemote}); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("bob attaches to @vision/train: %v, want permission_denied", err)
	}
	// Every replica holds the two jobs under their internal names.
	want := []string{"@nlp/train", "@vision/train"}
	c.WaitFor(t, 10*time.Second, "every replica to hold "+strings.Join(want, " and "), func() bool {
		for i := range 3 {
			var names []string
			for _, j := range c.Node(i).LocalJobs() {
				names = append(names, j.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, want) {
				return false
			}
		}
		return true
	})
}

// TestTenantCannotTouchAnotherTenantsJob (issue 37, item 2): knowing a
// job's name was enough to read its spec, attach and steal its batches,
// renew or detach its consumers, lease its splits in its consumer's
// local worker's name, record a forged failure, and replace it with a
// forged checkpoint. Under mutual TLS job names are per tenant: another
// tenant's client (and the default tenant's) giving the same name acts
// on a job of its own, never on the victim's, and naming the victim's
// job by its internal name ("@vision/vision-train") is refused every one
// of these, through any node; the job is as it was; its own tenant and
// an administrator are not refused.
func TestTenantCannotTouchAnotherTenantsJob(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	follower := c.Node((li + 1) % 3).Addr()
	leaderAddr := c.Node(li).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	carol := newTenantClient(t, p, "carol", "", false)
	ops := newTenantClient(t, p, "ops", "", true)

	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 3000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	const job, internal = "vision-train", "@vision/vision-train"
	opts := api.JobOptions{Name: job, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	var info api.JobInfo
	if err := alice.call(follower, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "a0"}, &info); err != nil {
		t.Fatalf("alice creates her job: %v", err)
	}
	if info.Name != job || info.Tenant != "vision" {
		t.Fatalf("alice's job is answered as %q of tenant %q, want %q of vision", info.Name, info.Tenant, job)
	}
	local := jobspec.LocalWorkerPrefix + "a0"
	attacks := func(name string) []attack {
		o := opts
		o.Name = name
		return []attack{
			{"attach a consumer", api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: o, Consumer: "b0"}},
			{"attach by heartbeat", api.MethodHeartbeat, api.JobRequest{Job: name, Consumer: "b0"}},
			{"renew the victim's consumer", api.MethodHeartbeat, api.JobRequest{Job: name, Consumer: "a0"}},
			{"detach the victim's consumer", api.MethodDetach, api.JobRequest{Job: name, Consumer: "a0"}},
			{"lease in the victim's local worker's name", api.MethodLease, api.LeaseRequest{Job: name, Worker: local, N: 1}},
			{"record a forged failure", api.MethodEndTask, api.EndTaskRequest{Job: name, Worker: local, Failure: "forged"}},
			{"send receipts", api.MethodReceipts, api.ReceiptsRequest{Job: name, Consumer: "a0"}},
			{"read the spec", api.MethodJobGet, api.JobRequest{Job: name}},
			{"replace it with a forged checkpoint", api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: o, Consumer: "b1",
				Resume: &api.ResumePart{From: info.ID, Part: "a0", Want: 1, Delivered: ranges.Delivered{}}}},
		}
	}
	thieves := []struct {
		name string
		c    *tenantClient
	}{{"bob (tenant nlp)", bob}, {"carol (the default tenant)", carol}}
	// By the victim's internal name: refused, whether or not such a job
	// exists (no oracle).
	// job.get answers as a job that does not exist (TestJobGetIsNoOracle).
	for _, who := range thieves {
		for _, a := range append(attacks(internal), attacks("@nlp/nothing-here")...) {
			want := transport.ErrPermissionDenied
			if a.method == api.MethodJobGet {
				want = transport.ErrNotFound
			}
			for _, addr := range []string{follower, leaderAddr} {
				if err := who.c.call(addr, a.method, a.req, nil); !errors.Is(err, want) {
					t.Errorf("%s tried to %s of alice's job (%s, by an internal name) through %s: %v, want %s", who.name, a.what, a.method, addr, err, want.Code)
				}
			}
		}
	}
	// By its name: every thief's own job of that name, whatever the
	// outcome there.
	for _, who := range thieves {
		for _, a := range attacks(job) {
			who.c.call(follower, a.method, a.req, nil)
		}
	}
	// The data plane: a stream of alice's job from any worker, by either
	// name.
	for i := range 3 {
		for _, name := range []string{job, internal} {
			if err := bob.firstBatch(c.Node(i).Addr(), name, 0, "a0", info.Capability); err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("bob reads a batch of %q with alice's capability from %s: %v, want permission denied", name, c.Name(i), err)
			}
		}
	}
	got, err := c.Node(li).JobGet(context.Background(), internal)
	if err != nil {
		t.Fatal(err)
	}
	if got.Job.ID != info.ID || len(got.Job.Consumers) != 1 || got.Job.Consumers[0] != "a0" || got.Job.Failure != "" {
		t.Errorf("after the attacks alice's job is id %d, consumers %v, failure %q; want id %d, consumers [a0], no failure", got.Job.ID, got.Job.Consumers, got.Job.Failure, info.ID)
	}
	// Bob's "vision-train" is his own job, answered by the name he gave.
	var bobs api.JobGetResponse
	if err := bob.call(follower, api.MethodJobGet, api.JobRequest{Job: job}, &bobs); err != nil || bobs.Job.ID == info.ID || bobs.Job.Tenant != "nlp" || bobs.Job.Name != job {
		t.Errorf("bob's job %q: id %d (alice's: %d), tenant %q, name %q, err %v; want his own, of nlp, named %q", job, bobs.Job.ID, info.ID, bobs.Job.Tenant, bobs.Job.Name, err, job)
	}
	// Her own tenant and an administrator are not refused.
	var g api.JobGetResponse
	if err := alice.call(follower, api.MethodJobGet, api.JobRequest{Job: job}, &g); err != nil || len(g.Spec) == 0 || g.Job.ID != info.ID || g.Job.Name != job {
		t.Errorf("alice reads her job's spec: %v (id %d name %q)", err, g.Job.ID, g.Job.Name)
	}
	if err := ops.call(follower, api.MethodJobGet, api.JobRequest{Job: internal}, &g); err != nil || len(g.Spec) == 0 || g.Job.ID != info.ID || g.Job.Name != internal {
		t.Errorf("an administrator reads alice's job's spec as %q: %v (id %d name %q)", internal, err, g.Job.ID, g.Job.Name)
	}
	if err := alice.call(follower, api.MethodHeartbeat, api.JobRequest{Job: job, Consumer: "a0"}, nil); err != nil {
		t.Errorf("alice renews her consumer: %v", err)
	}
	// An internal name is no client's to give, even of its own job.
	if err := alice.call(follower, api.MethodHeartbeat, api.JobRequest{Job: internal, Consumer: "a0"}, nil); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("alice renews her consumer by the job's internal name: %v, want permission_denied", err)
	}
}

// attack is a request a thief makes of a victim's job.
type attack struct {
	what   string
	method string
	req    any
}

// TestTenantsBareNameJobStaysItsTenants: a tenant's job with a bare name
// (made while a server of an older release was in the cluster: a node of
// that release forwards its tenant's request with the name as given, or
// made before names were per tenant) stays its tenant's under that
// name: its tenant's clients, naming it as before, reach it on the
// control and data planes; another tenant giving the name gets a job of
// its own.
func TestTenantsBareNameJobStaysItsTenants(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	follower := c.Node((li + 1) % 3).Addr()
	cert, key := p.issue(t, transport.RoleNode, "old-node")
	tr, err := newStranger(t, p.caFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	codec, err := transport.NewCodec(transport.DefaultConfig().MaxHeaderBytes, transport.DefaultConfig().MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	oldNode := &tenantClient{t: t, tr: tr, codec: codec}
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)

	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 1000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	opts := api.JobOptions{Name: "legacy", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
	caller := api.Principal{Name: "spiffe://prod/client/alice", Tenant: "vision"}
	var made api.JobInfo
	if err := oldNode.call(c.Node(li).Addr(), api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "a0", Forwarded: true, Caller: &caller}, &made); err != nil {
		t.Fatalf("a node of an older release forwards alice's distribute: %v", err)
	}
	if made.Name != "legacy" || made.Tenant != "vision" {
		t.Fatalf("the forwarded distribute made %q of tenant %q, want legacy of vision", made.Name, made.Tenant)
	}
	c.WaitFor(t, 10*time.Second, "every replica to know the job", func() bool {
		for i := range 3 {
			if _, err := c.Node(i).JobGet(context.Background(), "legacy"); err != nil {
				return false
			}
		}
		return true
	})
	var g api.JobGetResponse
	if err := alice.call(follower, api.MethodJobGet, api.JobRequest{Job: "legacy"}, &g); err != nil || g.Job.ID != made.ID || g.Job.Name != "legacy" {
		t.Errorf("alice's job.get of legacy: id %d name %q, %v; want id %d", g.Job.ID, g.Job.Name, err, made.ID)
	}
	if err := alice.call(follower, api.MethodHeartbeat, api.JobRequest{Job: "legacy", Consumer: "a0"}, nil); err != nil {
		t.Errorf("alice renews her consumer of legacy: %v", err)
	}
	if err := alice.firstBatch(follower, "legacy", made.ID, "a0", made.Capability); err != nil {
		t.Errorf("alice streams legacy: %v", err)
	}
	// Bob's "legacy" is his own.
	var bobs api.JobInfo
	if err := bob.call(follower, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "b0"}, &bobs); err != nil || bobs.ID == made.ID || bobs.Tenant != "nlp" || bobs.Name != "legacy" {
		t.Errorf("bob's legacy: id %d (alice's %d) tenant %q name %q, %v; want his own", bobs.ID, made.ID, bobs.Tenant, bobs.Name, err)
	}
	if err := bob.firstBatch(follower, "legacy", made.ID, "a0", made.Capability); err == nil {
		t.Errorf("bob streams alice's legacy with her capability")
	}
	got, err := c.Node(li).JobGet(context.Background(), "legacy")
	if err != nil || got.Job.ID != made.ID || !slices.Equal(got.Job.Consumers, []string{"a0"}) {
		t.Errorf("alice's legacy after bob: %+v, %v; want id %d, consumers [a0]", got.Job, err, made.ID)
	}
}
