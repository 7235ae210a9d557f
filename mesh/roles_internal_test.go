package mesh

import (
	"slices"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

const testPolicy = `
roles:
  team-a:
    jobs: ["a-*"]
    data_roots: [teamA]
    stores: [lake-a]
    hosts: [data-a.example.com]
  team-b:
    jobs: ["b-*", "shared"]
    data_roots: [teamB]
  ci:
    jobs: ["ci-*"]
    data_roots: [teamB]
  ops-data:
    data_roots: ["*"]
    stores: ["*"]
    hosts: ["*"]
bindings:
  - tenant: vision
    roles: [team-a]
  - tenant: nlp
    roles: [team-b]
  - principal: "token:ci"
    roles: [ci]
`

// TestRolesTable is the roles' evaluation, pure (docs/operating/
// security.md, "Roles and grants"): tenant vision's principal, limited
// to jobs a-* and root teamA, may create a-1 and not b-x, and its jobs
// read teamA, not teamB; a principal's binding adds job names, not data;
// a tenant no binding names gets nothing; administrators, nodes and the
// unbound default tenant are not narrowed; no policy narrows nothing.
func TestRolesTable(t *testing.T) {
	pol, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	alice := api.Principal{Name: "spiffe://prod/client/alice", Tenant: "vision"}
	bob := api.Principal{Name: "spiffe://prod/client/bob", Tenant: "nlp"}
	ci := api.Principal{Name: "token:ci", Tenant: "nlp"}
	eve := api.Principal{Name: "spiffe://prod/client/eve", Tenant: "unbound"}
	carol := api.Principal{Name: "spiffe://prod/client/carol"}
	ops := api.Principal{Name: "spiffe://prod/client/ops", Admin: true}
	node := api.Principal{Name: "spiffe://prod/node/n1", Node: true}
	for _, c := range []struct {
		who string
		pol *Policy
		p   api.Principal
		job string
		may bool
	}{
		{"alice, a-1", pol, alice, "a-1", true},
		{"alice, a- itself", pol, alice, "a-", true},
		{"alice, b-x", pol, alice, "b-x", false},
		{"alice, a (no dash)", pol, alice, "a", false},
		{"bob, b-x", pol, bob, "b-x", true},
		{"bob, shared (an exact name)", pol, bob, "shared", true},
		{"bob, shared-2", pol, bob, "shared-2", false},
		{"the ci token, ci-7 (its own binding)", pol, ci, "ci-7", true},
		{"the ci token, b-x (its tenant's)", pol, ci, "b-x", true},
		{"bob, ci-7 (the token's binding, not his)", pol, bob, "ci-7", false},
		{"a tenant no binding names", pol, eve, "x", false},
		{"the default tenant, unbound", pol, carol, "x", false},
		{"an administrator", pol, ops, "b-x", true},
		{"a node", pol, node, "anything", true},
		{"no policy", nil, alice, "b-x", true},
	} {
		if got := c.pol.GrantsOf(c.p).MayJob(c.job); got != c.may {
			t.Errorf("%s: may %v, want %v (grants %s)", c.who, got, c.may, c.pol.GrantsOf(c.p).JobPatterns())
		}
	}

	for _, c := range []struct {
		who      string
		pol      *Policy
		p        api.Principal
		narrowed bool
		want     objstore.Grant
	}{
		{"alice", pol, alice, true, objstore.Grant{Roots: []string{"teamA"}, Stores: []string{"lake-a"}, Hosts: []string{"data-a.example.com"}}},
		{"bob", pol, bob, true, objstore.Grant{Roots: []string{"teamB"}, Stores: []string{}, Hosts: []string{}}},
		{"the ci token (a principal's binding grants no data)", pol, ci, true, objstore.Grant{Roots: []string{"teamB"}, Stores: []string{}, Hosts: []string{}}},
		{"an unbound tenant", pol, eve, true, objstore.Grant{Roots: []string{}, Stores: []string{}, Hosts: []string{}}},
		{"the unbound default tenant", pol, carol, false, objstore.Grant{}},
		{"an administrator", pol, ops, false, objstore.Grant{}},
		{"no policy", nil, alice, false, objstore.Grant{}},
	} {
		got, narrowed := c.pol.GrantsOf(c.p).Data()
		if narrowed != c.narrowed || !slices.Equal(got.Roots, c.want.Roots) || !slices.Equal(got.Stores, c.want.Stores) || !slices.Equal(got.Hosts, c.want.Hosts) {
			t.Errorf("%s: data %+v (narrowed %v), want %+v (%v)", c.who, got, narrowed, c.want, c.narrowed)
		}
	}
	// A job's tenant decides its data on every node alike.
	if g, ok := pol.DataGrantOf("vision"); !ok || !slices.Equal(g.Roots, []string{"teamA"}) {
		t.Errorf("a job of vision reads %+v (%v), want root teamA", g, ok)
	}

	// default_tenant: true binds the default tenant's data (and "*").
	withDefault, err := ParsePolicy([]byte(testPolicy + "  - default_tenant: true\n    roles: [ops-data]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := withDefault.GrantsOf(carol).Data(); !ok || g.Roots != nil || g.Stores != nil || g.Hosts != nil {
		t.Errorf("the default tenant bound to all: %+v (%v), want narrowed to everything (nil lists)", g, ok)
	}
}

// TestParsePolicyErrors: a policy file's mistakes are refused, naming
// them.
func TestParsePolicyErrors(t *testing.T) {
	for in, want := range map[string]string{
		"roles: {r: {jobs: [a-*]}}\nbindings: [{tenant: t, roles: [nope]}]": `no role named "nope"`,
		"roles: {r: {jobs: [a*b]}}":                                         "'*' only at the end",
		"roles: {r: {job: [a]}}":                                            "field job not found",
		"bindings: [{roles: []}]":                                           "exactly one of tenant, principal",
		"bindings: [{tenant: t, principal: p, roles: []}]":                  "exactly one of tenant, principal",
		"roles: {r: {data_roots: [\"\"]}}":                                  "want a name",
		"roles: [1, 2]":                                                     "policy:",
	} {
		_, err := ParsePolicy([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", in, err, want)
		}
	}
	if _, err := ParsePolicy([]byte(strings.Repeat(" ", maxPolicyBytes+1))); err == nil {
		t.Error("a policy past its bound was taken")
	}
}

// FuzzParsePolicy: the parser never panics, and a policy it takes is
// evaluated without panicking, its grants within what it says.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(testPolicy), "vision", "a-1")
	f.Add([]byte("roles: {r: {jobs: ['*']}}\nbindings: [{default_tenant: true, roles: [r]}]"), "", "x")
	f.Add([]byte(`{"roles": {"r": {"jobs": ["p*"], "hosts": ["*.x"]}}, "bindings": [{"principal": "token:a", "roles": ["r"]}]}`), "t", "p")
	f.Add([]byte("bindings: [{tenant: t, roles: [r, r, r]}]"), "t", "j")
	f.Fuzz(func(t *testing.T, data []byte, tenant, job string) {
		pol, err := ParsePolicy(data)
		if err != nil {
			return
		}
		p := api.Principal{Name: "token:a", Tenant: tenant}
		g := pol.GrantsOf(p)
		if g.MayJob(job) {
			granted := false
			for _, b := range pol.Bindings {
				if b.Tenant == tenant && tenant != "" || b.Principal == p.Name || b.DefaultTenant && tenant == "" {
					granted = granted || len(b.Roles) > 0
				}
			}
			if !granted {
				t.Fatalf("job %q granted to tenant %q with no binding of roles", job, tenant)
			}
		}
		g.Data()
		g.JobPatterns()
	})
}
