package mesh_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
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
		default:
			t.Errorf("distribute %d: %v, want success or quota_exceeded", i, err)
		}
	}
	if ok < 1 || ok > 3 || ok+refused != n {
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
		if err != nil && !errors.Is(err, api.ErrQuota) {
			t.Errorf("heartbeat %d: %v, want success or quota_exceeded", i, err)
		}
	}
	if u := c.Node(li).Raft().TenantUsage("nlp"); u.Consumers > 5 {
		t.Fatalf("consumers after concurrent heartbeats: %d, want at most 5 (--tenant-max-consumers)", u.Consumers)
	}
}
