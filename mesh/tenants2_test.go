package mesh_test

import (
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
)

// TestTenantQuotaHoldsUnderConcurrency (security review of issue 37):
// the leader read a tenant's usage and proposed afterwards, so 60
// concurrent distributes (distinct names and specs) of one tenant at
// --tenant-max-jobs 3 all succeeded, and its jobs, datasets, consumers
// and state bytes overshot. Now at most 3 succeed, every other one is
// refused with quota_exceeded, and the state holds at most 3 of its jobs;
// the same for consumers attaching by heartbeat at once.
func TestTenantQuotaHoldsUnderConcurrency(t *testing.T) {
	c, p := mtlsClusterWith(t, 3, func(_ int, cfg *mesh.Config) {
		cfg.Tenants.MaxJobs = 3
		cfg.Tenants.MaxConsumers = 5
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	bob := newTenantClient(t, p, "bob", "nlp", false)

	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: uint64(100 + i), SplitSize: 50})).CanonicalEncoding()
			if err != nil {
				errs[i] = err
				return
			}
			opts := api.JobOptions{Name: fmt.Sprintf("bob-%d", i), Sharding: jobspec.Dynamic, MaxWorkers: 1}
			errs[i] = bob.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, nil)
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	var okJob string
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			okJob = fmt.Sprintf("bob-%d", i)
		case errors.Is(err, api.ErrQuota):
			refused++
		case errors.Is(err, transport.ErrUnavailable):
			t.Logf("distribute %d: %v (a change of leader under load)", i, err)
		default:
			t.Errorf("distribute %d: %v, want success or quota_exceeded", i, err)
		}
	}
	if ok < 1 || ok > 3 || refused < n/2 {
		t.Fatalf("%d of %d concurrent distributes succeeded and %d were refused with quota_exceeded; want 1 to 3 (--tenant-max-jobs 3), the rest refused", ok, n, refused)
	}
	u := c.Node(li).Raft().TenantUsage("nlp")
	if u.Jobs > 3 || u.Datasets > 3 || u.Consumers > 3 {
		t.Fatalf("tenant usage after the burst: %+v, want at most 3 jobs, datasets and consumers", u)
	}

	// Consumers attaching at once by heartbeat: at most 5 in all.
	hb := make([]error, 30)
	for i := range hb {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hb[i] = bob.call(addr, api.MethodHeartbeat, api.JobRequest{Job: okJob, Consumer: fmt.Sprintf("h%d", i)}, nil)
		}()
	}
	wg.Wait()
	for i, err := range hb {
		if err != nil && !errors.Is(err, api.ErrQuota) && !errors.Is(err, transport.ErrUnavailable) {
			t.Errorf("heartbeat %d: %v, want success or quota_exceeded", i, err)
		}
	}
	if u := c.Node(li).Raft().TenantUsage("nlp"); u.Consumers > 5 {
		t.Fatalf("consumers after concurrent heartbeats: %d, want at most 5 (--tenant-max-consumers)", u.Consumers)
	}
}

// TestShareGroupsAreNoTenants (security review of issue 37): a share
// group (the hidden job `share~N` whose splits the jobs sharing a dataset
// lease once) had no owner, so the policy took it for the default
// tenant's: a default-tenant client's worker.endtask with a forged
// failure on it was recorded, and job.get told another tenant's client
// whether a group (or another tenant's job) existed (not_found against
// permission_denied). Now a client of any tenant is refused every
// request about a group's name, existing or not, alike, and the group is
// as it was; job.get of another tenant's job (by its internal name, or
// by its short name, which is then the asker's own job), or of a group,
// answers exactly as job.get of a name no job has.
func TestShareGroupsAreNoTenants(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	carol := newTenantClient(t, p, "carol", "", false)
	ops := newTenantClient(t, p, "ops", "", true)

	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 3000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	var info api.JobInfo
	opts := api.JobOptions{Name: "vision-shared", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers, Share: true}
	if err := alice.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "a0"}, &info); err != nil {
		t.Fatal(err)
	}
	group := info.ShareGroup
	if group == "" {
		t.Fatalf("alice's sharing job has no share group: %+v", info)
	}
	local := jobspec.LocalWorkerPrefix + "x"
	for _, who := range []struct {
		name string
		c    *tenantClient
	}{{"carol (the default tenant)", carol}, {"bob (tenant nlp)", bob}, {"alice (the sharing job's tenant)", alice}} {
		var denied []string
		for _, g := range []string{group, "share~999999"} {
			for _, m := range []struct {
				method string
				req    any
			}{
				{api.MethodEndTask, api.EndTaskRequest{Job: g, Worker: local, Failure: "forged"}},
				{api.MethodLease, api.LeaseRequest{Job: g, Worker: local, N: 1}},
				{api.MethodHeartbeat, api.JobRequest{Job: g, Consumer: "x"}},
				{api.MethodDetach, api.JobRequest{Job: g, Consumer: "x"}},
			} {
				err := who.c.call(addr, m.method, m.req, nil)
				if !errors.Is(err, transport.ErrPermissionDenied) {
					t.Errorf("%s: %s on %s: %v, want permission_denied", who.name, m.method, g, err)
					continue
				}
				denied = append(denied, strings.ReplaceAll(err.Error(), g, "G"))
			}
		}
		if len(denied) == 8 && !slices.Equal(denied[:4], denied[4:]) {
			t.Errorf("%s: the answers about an existing group %q differ from a name no group has: %q vs %q", who.name, group, denied[:4], denied[4:])
		}
	}
	v, ok := c.Node(li).Raft().Job(group)
	if !ok || v.Failure != nil {
		t.Errorf("after the attacks the share group is there %v, failure %v; want there, no failure", ok, v.Failure)
	}

	// job.get: another tenant's job, or a group, answers as no job.
	answer := func(who *tenantClient, job string) string {
		err := who.call(addr, api.MethodJobGet, api.JobRequest{Job: job}, nil)
		if !errors.Is(err, transport.ErrNotFound) {
			t.Errorf("job.get of %q: %v, want not_found", job, err)
			return ""
		}
		return strings.ReplaceAll(err.Error(), job, "J")
	}
	none := answer(bob, "no-such-job")
	for _, c := range []struct {
		who *tenantClient
		job string
	}{{bob, "vision-shared"}, {carol, "vision-shared"}, {bob, "@vision/vision-shared"}, {carol, "@vision/vision-shared"}, {bob, group}, {carol, group}, {alice, group}} {
		if got := answer(c.who, c.job); got != none {
			t.Errorf("job.get of %q answers %q, a name no job has %q: an oracle", c.job, got, none)
		}
	}
	if err := ops.call(addr, api.MethodJobGet, api.JobRequest{Job: "@vision/vision-shared"}, nil); err != nil {
		t.Errorf("an administrator's job.get of alice's job: %v", err)
	}
}

// TestAuditFloodIsBounded (security review of issue 37): every refused
// request wrote an audit line with the job name its client chose, without
// bound (1 MB/s of log from one client). Now a principal's refused
// requests get a few audit lines a window, the rest counted
// (Node.AuditSuppressed, the audit_suppressed_total metric) and summed
// up in one summary line; the names are cut; another principal's refusals
// are still logged.
func TestAuditFloodIsBounded(t *testing.T) {
	const auditBurst = 20 // mesh's
	logs := make([]*syncBuffer, 3)
	for i := range logs {
		logs[i] = &syncBuffer{}
	}
	c, p := mtlsClusterWith(t, 3, func(i int, cfg *mesh.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	bob := newTenantClient(t, p, "bob", "nlp", false)
	alice := newTenantClient(t, p, "alice", "vision", false)

	const n = 300
	long := strings.Repeat("x", 4096)
	answered := 0 // requests a leader answered (under load a change of leader may refuse some before)
	for i := range n {
		job := fmt.Sprintf("%s-%d", long, i)
		method := api.MethodDetach
		if i%2 == 1 {
			method = api.MethodJobGet
		}
		err := bob.call(addr, method, api.JobRequest{Job: job, Consumer: "c"}, nil)
		switch {
		case err == nil:
			t.Fatalf("bob's %s of a job no one has: no error", method)
		case errors.Is(err, transport.ErrNotFound):
			answered++ // by a leader, which audits it
		}
	}
	aliceAnswered := errors.Is(alice.call(addr, api.MethodDetach, api.JobRequest{Job: "alice-none", Consumer: "c"}, nil), transport.ErrNotFound)
	// Summed over the nodes: a change of leader under load moves the
	// audit (and its limiter) to another node.
	var bobLines, aliceLines, bytes, summarized int
	var left int64
	for i := range 3 {
		c.Node(i).FlushAudit()
		left += c.Node(i).AuditSuppressed()
		for _, l := range strings.Split(logs[i].String(), "\n") {
			if strings.Contains(l, `msg="audit: refused requests left out"`) && strings.Contains(l, "client/bob") {
				var k int
				j := strings.Index(l, "suppressed=")
				if _, err := fmt.Sscanf(l[j:], "suppressed=%d", &k); err != nil {
					t.Fatalf("summary line %q: %v", l, err)
				}
				summarized += k
			}
			if !strings.Contains(l, "msg=audit") {
				continue
			}
			bytes += len(l)
			switch {
			case strings.Contains(l, "principal=spiffe://prod/client/bob"):
				bobLines++
			case strings.Contains(l, "principal=spiffe://prod/client/alice"):
				aliceLines++
			}
			if len(l) > 2048 {
				t.Errorf("an audit line of %d bytes: %.200s…", len(l), l)
			}
		}
	}
	t.Logf("%d refused requests of bob: %d audit lines (%d bytes of audit in all), %d left out, summaries say %d", n, bobLines, bytes, left, summarized)
	if bobLines < 1 || bobLines > 3*auditBurst {
		t.Errorf("bob's %d refused requests wrote %d audit lines, want 1 to %d (rate-limited per principal, %d a window on each node that led)", n, bobLines, 3*auditBurst, auditBurst)
	}
	// A request retried after a change of leader is audited by each
	// leader that answered it (seen once under load: 301 of 300).
	const retried = 10
	if got := int(left) + bobLines; got < answered || got > n+retried {
		t.Errorf("%d audit lines and %d left out, want %d to %d in all (the requests a leader answered, and all, and a few retried)", bobLines, left, answered, n+retried)
	}
	if summarized != int(left) {
		t.Errorf("the summary lines count %d left out, want %d", summarized, left)
	}
	if aliceAnswered && aliceLines != 1 {
		t.Errorf("alice's refused request while bob floods: %d audit lines, want 1", aliceLines)
	}
}

// TestShareStatsTotalsAreTheOperators (security review of issue 37):
// worker.sharestats without a job name answered another tenant's client
// the node-wide sharing figures (batches produced, window bytes,
// windows), every tenant's traffic. Now a tenant gets its jobs' counters
// only (the totals 0); an administrator gets all.
func TestShareStatsTotalsAreTheOperators(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	ops := newTenantClient(t, p, "ops", "", true)
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 3000, Seed: 1, SplitSize: 100})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	var info api.JobInfo
	opts := api.JobOptions{Name: "vision-shared", Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers, Share: true}
	if err := alice.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "reader"}, &info); err != nil {
		t.Fatal(err)
	}
	if err := alice.firstBatch(addr, "vision-shared", info.ID, "reader", info.Capability); err != nil {
		t.Fatalf("alice reads a batch of her sharing job: %v", err)
	}
	var all api.WorkerShareStats
	c.WaitFor(t, 20*time.Second, "the node counts alice's shared production", func() bool {
		all = api.WorkerShareStats{}
		return ops.call(addr, api.MethodShareStats, api.ShareStatsRequest{}, &all) == nil && all.Produced > 0 && all.Windows > 0
	})
	var st api.WorkerShareStats
	if err := bob.call(addr, api.MethodShareStats, api.ShareStatsRequest{}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Produced != 0 || st.Bytes != 0 || st.Windows != 0 || len(st.Jobs) != 0 {
		t.Errorf("bob's sharing counters of the node: produced %d, window bytes %d, windows %d, jobs %v; want none of alice's traffic (the administrator's: produced %d, windows %d)",
			st.Produced, st.Bytes, st.Windows, st.Jobs, all.Produced, all.Windows)
	}
	var mine api.WorkerShareStats
	if err := alice.call(addr, api.MethodShareStats, api.ShareStatsRequest{}, &mine); err != nil || len(mine.Jobs) != 1 || mine.Jobs[0].Job != "vision-shared" {
		t.Errorf("alice's sharing counters of the node: %+v %v, want her job's", mine, err)
	}
}
