package mesh

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// TestPolicyTable is the policy's evaluation, pure (docs/operating/
// security.md, "Tenants and permissions"): who a certificate makes a
// principal, who may act on a job of which tenant, who the KV store is
// for, and which growth a tenant's quotas refuse, naming the bound.
func TestPolicyTable(t *testing.T) {
	alice := identityPrincipal(transport.Identity{Cluster: "prod", Role: transport.RoleClient, Name: "alice", Tenant: "vision"})
	carol := identityPrincipal(transport.Identity{Cluster: "prod", Role: transport.RoleClient, Name: "carol"})
	ops := identityPrincipal(transport.Identity{Cluster: "prod", Role: transport.RoleClient, Name: "ops", Admin: true})
	node := identityPrincipal(transport.Identity{Cluster: "prod", Role: transport.RoleNode, Name: "n1"})
	want := map[string]api.Principal{
		"alice": {Name: "spiffe://prod/client/alice", Tenant: "vision"},
		"carol": {Name: "spiffe://prod/client/carol"},
		"ops":   {Name: "spiffe://prod/client/ops", Admin: true},
		"node":  {Name: "spiffe://prod/node/n1", Node: true},
	}
	for name, got := range map[string]api.Principal{"alice": alice, "carol": carol, "ops": ops, "node": node} {
		if got != want[name] {
			t.Errorf("%s's principal %+v, want %+v", name, got, want[name])
		}
	}

	for _, c := range []struct {
		who    string
		p      api.Principal
		job    string
		tenant string
		exists bool
		may    bool
	}{
		{"alice, her tenant's job", alice, "j", "vision", true, true},
		{"alice, another tenant's job", alice, "j", "nlp", true, false},
		{"alice, a default tenant's (or legacy) job", alice, "j", "", true, false},
		{"alice, a name no job has", alice, "j", "", false, true},
		{"carol (default tenant), a legacy job", carol, "j", "", true, true},
		{"carol, a tenant's job", carol, "j", "vision", true, false},
		{"an administrator, any job", ops, "j", "vision", true, true},
		{"a node, any job", node, "j", "nlp", true, true},
		{"dev mode's anonymous principal, any job", anonymous, "j", "vision", true, true},
		{"alice, a share group", alice, "share~364", "", true, false},
		{"carol (default tenant), a share group (owner-less)", carol, "share~364", "", true, false},
		{"carol, a share group's name no group has", carol, "share~9", "", false, false},
		{"an administrator, a share group", ops, "share~364", "", true, true},
		{"a node, a share group", node, "share~364", "", true, true},
		// Job names are per tenant (tenantnames.go): internal names.
		{"alice, her job by its internal name", alice, "@vision/j", "vision", true, true},
		{"alice, her new job by its internal name", alice, "@vision/j", "", false, true},
		{"alice, another tenant's internal name no job has", alice, "@nlp/j", "", false, false},
		{"alice, an \"@\" name she gave (qualified)", alice, "@vision/@nlp/j", "", false, false},
		{"alice, a share group's name she gave (qualified)", alice, "@vision/share~364", "", false, false},
		{"carol, a tenant's internal name no job has", carol, "@vision/j", "", false, false},
		{"an administrator, a tenant's internal name", ops, "@nlp/j", "nlp", true, true},
	} {
		if got := mayActOnJob(c.p, c.job, c.tenant, c.exists); got != c.may {
			t.Errorf("%s: may act %v, want %v", c.who, got, c.may)
		}
	}
	for _, c := range []struct {
		p       api.Principal
		mayKVer bool
	}{{alice, false}, {carol, false}, {ops, true}, {node, true}, {anonymous, true}} {
		if c.p.Privileged() != c.mayKVer {
			t.Errorf("%s uses the KV store: %v, want %v", c.p.Name, c.p.Privileged(), c.mayKVer)
		}
	}

	tc := TenantsConfig{MaxJobs: 2, MaxDatasets: 2, MaxStateBytes: 100, MaxConsumers: 3, MaxJobNodes: 4, AdminReserve: 10}
	for _, c := range []struct {
		what string
		p    api.Principal
		u    fsm.Usage
		g    growth
		want string // a part of the refusal; "" allowed
	}{
		{"a first job", alice, fsm.Usage{}, growth{job: true, workers: 2}, ""},
		{"a job at the tenant's job limit", alice, fsm.Usage{Jobs: 2}, growth{job: true, workers: 2}, "--tenant-max-jobs"},
		{"a job on every node", alice, fsm.Usage{}, growth{job: true}, "--tenant-max-job-nodes"},
		{"a job on more nodes than allowed", alice, fsm.Usage{}, growth{job: true, workers: 5}, "--tenant-max-job-nodes"},
		{"joining a job at the job limit", alice, fsm.Usage{Jobs: 2}, growth{consumer: true}, ""},
		{"a consumer at the consumer limit", alice, fsm.Usage{Consumers: 3}, growth{consumer: true}, "--tenant-max-consumers"},
		{"a dataset at the dataset limit", alice, fsm.Usage{Datasets: 2}, growth{dataset: true, specBytes: 1}, "--tenant-max-datasets"},
		{"a dataset past the byte limit", alice, fsm.Usage{SpecBytes: 90}, growth{dataset: true, specBytes: 11}, "--tenant-max-state-bytes"},
		{"a dataset up to the byte limit", alice, fsm.Usage{SpecBytes: 90}, growth{dataset: true, specBytes: 10}, ""},
		{"a job in the administrators' slots", carol, fsm.Usage{AllJobs: fsm.MaxJobs - 10}, growth{job: true, workers: 1}, "--admin-reserve"},
		{"a dataset in the administrators' slots", carol, fsm.Usage{AllDatasets: fsm.MaxDatasets - 10}, growth{dataset: true}, "--admin-reserve"},
		{"an administrator past every tenant limit", ops, fsm.Usage{Jobs: 9, Datasets: 9, Consumers: 9, SpecBytes: 999, AllJobs: fsm.MaxJobs - 1}, growth{job: true, dataset: true, consumer: true, specBytes: 99}, ""},
		{"a node past every tenant limit", node, fsm.Usage{Jobs: 9}, growth{job: true}, ""},
	} {
		got := overQuota(tc, c.p, c.u, c.g)
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: refused (%s), want allowed", c.what, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: %q, want a refusal naming %s", c.what, got, c.want)
		}
	}
}

// TestQuotaGuardByLevel: a tenant's command travels in a Quota only when
// every Raft server speaks ProtocolQuotas (an older server would refuse
// the unknown command type); the privileged's never does.
func TestQuotaGuardByLevel(t *testing.T) {
	n := &Node{cfg: Config{Tenants: TenantsConfig{MaxJobs: 3, MaxDatasets: 4, MaxConsumers: 5, MaxStateBytes: 6, AdminReserve: 7}}}
	alice := api.Principal{Name: "spiffe://prod/client/alice", Tenant: "vision"}
	ops := api.Principal{Name: "spiffe://prod/client/ops", Admin: true}
	c := fsm.NewAttachConsumer("j", "c")
	for _, x := range []struct {
		p     api.Principal
		level int
		typ   fsm.CommandType
	}{
		{alice, fsm.ProtocolQuotas, fsm.TypeQuota},
		{alice, fsm.ProtocolOwners, fsm.TypeAttachConsumer},
		{ops, fsm.ProtocolQuotas, fsm.TypeAttachConsumer},
		{anonymous, fsm.ProtocolQuotas, fsm.TypeAttachConsumer},
	} {
		if got := n.quotaGuard(x.p, x.level, c); got.Type != x.typ {
			t.Errorf("%s at level %d: %v, want %v", x.p.Name, x.level, got.Type, x.typ)
		}
	}
	if l := n.cfg.Tenants.limits(); l != (fsm.Limits{MaxJobs: 3, MaxDatasets: 4, MaxConsumers: 5, MaxSpecBytes: 6, AdminReserve: 7}) {
		t.Errorf("limits %+v", l)
	}
}
