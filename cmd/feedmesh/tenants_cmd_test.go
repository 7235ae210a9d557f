package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestTwoTeamsWalkthrough runs docs/operating/security.md's walkthrough
// ("Two teams on one mesh") with the commands as an operator types them:
// a CA, node certificates, an administrator's and team vision's client
// certificates, and a token of team nlp on a certificate of the default
// tenant; both teams read one dataset with --share, under the same job
// name "train" (job names are per tenant: two jobs), each sees its own
// job only, the administrator both (by their internal names,
// "@tenant/train"), and neither may read the other's job.
func TestTwoTeamsWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("feedmesh %s exited %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	must("tls", "ca", "create", "--cluster", "prod", "--dir", dir, "--days", "30")
	names := []string{"node-00", "node-01", "node-02"}
	for _, n := range names {
		must("tls", "cert", "create", "--dir", dir, "--node", n, "--days", "7")
	}
	must("tls", "cert", "create", "--dir", dir, "--client", "ops", "--admin", "--days", "7")
	if out := must("tls", "cert", "create", "--dir", dir, "--client", "alice", "--tenant", "vision", "--days", "7"); !strings.Contains(out, "of tenant vision") {
		t.Errorf("cert create --tenant says: %s", out)
	}
	must("tls", "cert", "create", "--dir", dir, "--client", "shared", "--days", "7")
	caFile := filepath.Join(dir, "prod-ca.crt")
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(_ int, cfg *mesh.Config) {
		cfg.TLSCA = caFile
		cfg.TLSCert = filepath.Join(dir, "prod-node-"+cfg.Name+".crt")
		cfg.TLSKey = filepath.Join(dir, "prod-node-"+cfg.Name+".key")
	}))
	addr := c.Node(1).Addr()
	as := func(client string, args ...string) []string {
		return append(args, "--addr", addr, "--tls-ca", caFile, "--tls-cert", filepath.Join(dir, "prod-client-"+client+".crt"), "--tls-key", filepath.Join(dir, "prod-client-"+client+".key"))
	}
	token := strings.TrimSpace(must(as("ops", "token", "create", "--id", "nlp-team", "--tenant", "nlp")...))
	if !strings.HasPrefix(token, "nlp-team.") {
		t.Fatalf("token create printed %q", token)
	}
	nlp := func(args ...string) []string { return append(as("shared", args...), "--token", token) }

	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 3000, split_size: 100}\nops:\n  - batch: {size: 50}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(args []string) readSummary {
		t.Helper()
		var s readSummary
		if err := json.Unmarshal([]byte(must(args...)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	readArgs := []string{"read", "--spec", spec, "--share", "--json", "--progress=false", "--offload", "remote"}
	if s := read(as("alice", append(readArgs, "--job", "train")...)); s.Elements != 3000 {
		t.Errorf("vision's read: %d elements, want 3000", s.Elements)
	}
	if s := read(nlp(append(readArgs, "--job", "train")...)); s.Elements != 3000 {
		t.Errorf("nlp's read: %d elements, want 3000", s.Elements)
	}
	jobs := func(args []string) []string {
		t.Helper()
		var js []api.JobInfo
		if err := json.Unmarshal([]byte(must(args...)), &js); err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, j := range js {
			ns = append(ns, j.Tenant+"/"+j.Name)
		}
		slices.Sort(ns)
		return ns
	}
	for _, tc := range []struct {
		who  string
		args []string
		want []string
	}{
		{"alice (vision)", as("alice", "jobs", "--json"), []string{"vision/train"}},
		{"the nlp token", nlp("jobs", "--json"), []string{"nlp/train"}},
		{"the shared certificate without the token", as("shared", "jobs", "--json"), nil},
		{"ops (administrator)", as("ops", "jobs", "--json"), []string{"nlp/@nlp/train", "vision/@vision/train"}},
	} {
		if got := jobs(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists %v, want %v", tc.who, got, tc.want)
		}
	}
	if _, errOut, code := runCmd(t, nlp(append(readArgs, "--job", "@vision/train")...)...); code == 0 || !strings.Contains(errOut, "permission_denied") {
		t.Errorf("nlp reads vision's job by its internal name: exit %d: %s", code, errOut)
	}
	must(as("ops", "token", "revoke", "--id", "nlp-team")...)
	c.WaitFor(t, 10*time.Second, "the revoked token refused", func() bool {
		_, errOut, code := runCmd(t, nlp("jobs", "--json")...)
		return code != 0 && strings.Contains(errOut, "revoked")
	})
}
