package mesh_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/mesh/observe"
	"github.com/feedmesh/feedmesh/pipeline"
)

// TestStatusPageShowsTenantsJobs (issue 37, item 6): under mutual TLS the
// status snapshot (/status.json, the status page's data) answers 401
// without an access token or with a wrong one, a tenant's token sees its
// tenant's jobs only, and an administrator's every tenant's. Before, it
// showed every tenant's jobs to whoever reached --metrics-addr.
func TestStatusPageShowsTenantsJobs(t *testing.T) {
	c, p := mtlsCluster(t, 3)
	li, _ := c.WaitLeader(t, 20*time.Second)
	follower := (li + 1) % 3
	addr := c.Node(follower).Addr()
	ops := newTenantClient(t, p, "ops", "", true)
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	spec, err := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 100, Seed: 1, SplitSize: 50})).CanonicalEncoding()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct {
		who  *tenantClient
		name string
	}{{alice, "vision-a"}, {bob, "nlp-b"}} {
		opts := api.JobOptions{Name: j.name, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
		if err := j.who.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	token := func(id, tenant string, admin bool) string {
		var created api.TokenCreateResponse
		if err := ops.call(addr, api.MethodTokenCreate, api.TokenCreateRequest{ID: id, Tenant: tenant, Admin: admin}, &created); err != nil {
			t.Fatal(err)
		}
		return created.Token
	}
	visionToken, adminToken := token("vision-page", "vision", false), token("ops-page", "", true)

	srv := httptest.NewServer(observe.NewHandler(c.Node(follower), observe.Options{}))
	defer srv.Close()
	get := func(tok string) (int, []string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/status.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil
		}
		var s observe.Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range s.Jobs {
			names = append(names, j.Name)
		}
		slices.Sort(names)
		return resp.StatusCode, names
	}
	if code, jobs := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %v, want 401", code, jobs)
	}
	if code, jobs := get("vision-page.wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %v, want 401", code, jobs)
	}
	// The follower knows a token once it has applied it.
	var code int
	var jobs []string
	c.WaitFor(t, 10*time.Second, "the tenant's token accepted", func() bool {
		code, jobs = get(visionToken)
		return code == http.StatusOK
	})
	if !slices.Equal(jobs, []string{"vision-a"}) {
		t.Errorf("the vision tenant's token sees jobs %v, want [vision-a]", jobs)
	}
	c.WaitFor(t, 10*time.Second, "the administrator's token accepted", func() bool {
		code, jobs = get(adminToken)
		return code == http.StatusOK
	})
	if !slices.Equal(jobs, []string{"@nlp/nlp-b", "@vision/vision-a"}) {
		t.Errorf("an administrator's token sees jobs %v, want both tenants', by their internal names", jobs)
	}
}
