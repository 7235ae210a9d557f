package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/mesh"
)

// TestQuotaHoldsInTheApply (issue 37, item 4): the leader's quota check
// reads its own memory; a leader whose check let requests through (a
// race, a change of leader) used to have them all applied. Now a
// tenant's commands carry its limits and every replica's apply refuses
// what would pass them: two jobs proposed at once for a tenant with room
// for one, past the leader's check, give one job on every node and a
// quota_exceeded naming --tenant-max-jobs to the other caller.
func TestQuotaHoldsInTheApply(t *testing.T) {
	c, _ := mtlsClusterWith(t, 3, func(_ int, cfg *mesh.Config) {
		cfg.Tenants.MaxJobs = 1
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	leader := c.Node(li)
	bob := api.Principal{Name: "spiffe://prod/client/bob", Tenant: "nlp"}
	owner := fsm.Owner{Principal: bob.Name, Tenant: bob.Tenant}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ds := fsm.Dataset{Fingerprint: "fp-bob", Spec: []byte("bob's spec"), NumSplits: 2}
	if err := leader.ProposeForTenant(ctx, bob, fsm.NewRegisterOwnedDataset(ds, owner)); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := (api.JobOptions{Name: fmt.Sprintf("bob-%d", i), Sharding: jobspec.Dynamic, MaxWorkers: 1}).Normalize()
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = leader.ProposeForTenant(ctx, bob, fsm.NewCreateJob(fsm.Create{Name: n.Name(), Fingerprint: ds.Fingerprint, Options: n.Job(), Owner: &owner}))
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, api.ErrQuota) && strings.Contains(err.Error(), "--tenant-max-jobs 1"):
			refused++
		default:
			t.Errorf("job %d: %v, want success or quota_exceeded naming --tenant-max-jobs 1", i, err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d jobs created and %d refused; want 1 and 1", ok, refused)
	}
	for i := range 3 {
		deadline := time.Now().Add(10 * time.Second)
		for c.Node(i).Raft().TenantUsage("nlp").Jobs != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d's replica: %+v, want 1 job of nlp", i, c.Node(i).Raft().TenantUsage("nlp"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// An administrator's command is not wrapped: the reserve is theirs.
	ops := api.Principal{Name: "spiffe://prod/client/ops", Admin: true}
	n, err := (api.JobOptions{Name: "ops-1", Sharding: jobspec.Dynamic, MaxWorkers: 1}).Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.ProposeForTenant(ctx, ops, fsm.NewCreateJob(fsm.Create{Name: n.Name(), Fingerprint: ds.Fingerprint, Options: n.Job(), Owner: &fsm.Owner{Principal: ops.Name}})); err != nil {
		t.Fatalf("an administrator's job: %v", err)
	}
}
