package mesh_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// TestRolesNarrowATenant (issue 37, item 3): with a policy (--policy)
// binding tenant vision to jobs a-* and data root teamA, alice (vision)
// creates a-1 over teamA's file and streams it; she cannot create b-x
// (permission_denied naming what she is granted) nor read root teamB
// (permission_denied "not allowed", the answer of a path outside the
// roots); bob (nlp, jobs b-*, root teamB) reads teamB; an administrator
// is not narrowed.
func TestRolesNarrowATenant(t *testing.T) {
	base := t.TempDir()
	dirA, dirB := filepath.Join(base, "a"), filepath.Join(base, "b")
	for dir, body := range map[string]string{dirA: "alpha\nbeta\n", dirB: "gamma\ndelta\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lines.txt"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := mesh.ParsePolicy([]byte(`
roles:
  team-a: {jobs: ["a-*"], data_roots: [teamA]}
  team-b: {jobs: ["b-*"], data_roots: [teamB]}
bindings:
  - {tenant: vision, roles: [team-a]}
  - {tenant: nlp, roles: [team-b]}
`))
	if err != nil {
		t.Fatal(err)
	}
	c, p := mtlsClusterWith(t, 3, func(_ int, cfg *mesh.Config) {
		cfg.DataRoots = []string{"teamA=" + dirA, "teamB=" + dirB}
		cfg.Policy = pol
	})
	li, _ := c.WaitLeader(t, 20*time.Second)
	addr := c.Node((li + 1) % 3).Addr()
	alice := newTenantClient(t, p, "alice", "vision", false)
	bob := newTenantClient(t, p, "bob", "nlp", false)
	ops := newTenantClient(t, p, "ops", "", true)

	distribute := func(who *tenantClient, job, file string) (api.JobInfo, error) {
		spec, err := pipeline.NewSpec(pipeline.FromFiles("lines", file)).CanonicalEncoding()
		if err != nil {
			t.Fatal(err)
		}
		var info api.JobInfo
		opts := api.JobOptions{Name: job, Sharding: jobspec.Dynamic, Workers: jobspec.AllWorkers}
		err = who.call(addr, api.MethodDistribute, api.DistributeRequest{Spec: spec, Options: opts, Consumer: "c0"}, &info)
		return info, err
	}
	fileA, fileB := filepath.Join(dirA, "lines.txt"), filepath.Join(dirB, "lines.txt")

	info, err := distribute(alice, "a-1", fileA)
	if err != nil {
		t.Fatalf("alice's a-1 over teamA: %v", err)
	}
	if err := alice.firstBatch(addr, "a-1", info.ID, "c0", info.Capability); err != nil {
		t.Fatalf("alice streams a-1: %v", err)
	}
	if _, err := distribute(alice, "b-x", fileA); !errors.Is(err, transport.ErrPermissionDenied) || !strings.Contains(err.Error(), "a-*") {
		t.Errorf("alice creates b-x: %v, want permission_denied naming a-*", err)
	}
	_, errB := distribute(alice, "a-2", fileB)
	_, errNone := distribute(alice, "a-3", filepath.Join(base, "outside.txt"))
	if !errors.Is(errB, transport.ErrPermissionDenied) || !strings.Contains(errB.Error(), "not allowed") {
		t.Errorf("alice reads root teamB: %v, want permission_denied ... not allowed", errB)
	}
	if strings.ReplaceAll(errB.Error(), fileB, "F") != strings.ReplaceAll(strings.ReplaceAll(errNone.Error(), filepath.Join(base, "outside.txt"), "F"), "a-3", "a-2") {
		t.Errorf("root teamB answered unlike a path outside every root:\n%v\n%v", errB, errNone)
	}
	if _, err := distribute(bob, "b-1", fileB); err != nil {
		t.Errorf("bob's b-1 over teamB: %v", err)
	}
	if _, err := distribute(bob, "b-2", fileA); !errors.Is(err, transport.ErrPermissionDenied) {
		t.Errorf("bob reads root teamA: %v, want permission_denied", err)
	}
	if _, err := distribute(ops, "ops-1", fileB); err != nil {
		t.Errorf("an administrator's job over teamB: %v", err)
	}
}
