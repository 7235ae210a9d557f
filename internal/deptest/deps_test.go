package deptest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/feedmesh/feedmesh"

// graph is what `go list -deps` says a package links: every package and
// the packages it imports.
type graph struct {
	root    string
	imports map[string][]string
}

func load(t *testing.T, pkg string) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", module+"/"+pkg)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	g := graph{root: module + "/" + pkg, imports: map[string][]string{}}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		g.imports[p.ImportPath] = p.Imports
	}
	return g
}

// chain is one import path from the root to dep, for the failure message.
func (g graph) chain(dep string) string {
	prev := map[string]string{g.root: ""}
	queue := []string{g.root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append(path, strings.TrimPrefix(p, module+"/"))
			}
			slices.Reverse(path)
			return strings.Join(path, " → ")
		}
		for _, q := range g.imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return dep
}

// under reports whether pkg is prefix or a package below it.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// forbid fails for every linked package that bad names, with why.
func forbid(t *testing.T, g graph, why string, bad func(pkg string) bool) {
	t.Helper()
	var found []string
	for p := range g.imports {
		if bad(p) {
			found = append(found, p)
		}
	}
	slices.Sort(found)
	for _, p := range found {
		t.Errorf("%s links %s (%s): %s", strings.TrimPrefix(g.root, module+"/"), p, why, g.chain(p))
	}
}

// server is what a trainer's process must never carry: the Raft store,
// gossip, and every package of the node.
func server(p string) bool {
	for _, s := range []string{"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb", "go.etcd.io/bbolt", "github.com/boltdb/bolt", "github.com/hashicorp/memberlist"} {
		if under(p, s) || strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// clientSide are the module's packages a client may link: the wire API,
// the transport, the pipeline (a client runs a local worker and a cut's
// suffix), the worker (the client's local worker is one, leasing as a
// node does) with the pure cores it runs (the sharding policies, the
// sharing window and deterministic order: TestPureCores keeps them free
// of network, Raft and gossip), the data model, the version (a leaf), and
// the client itself.
var clientSide = []string{"api", "client", "pipeline", "transport", "ranges", "tensor",
	"internal/worker", "internal/splits", "internal/share", "internal/order", "internal/version", "cmd/libfeedmesh"}

func outsideClientSide(p string) bool {
	if !under(p, module) {
		return false
	}
	rel := strings.TrimPrefix(p, module+"/")
	for _, ok := range clientSide {
		if under(rel, ok) {
			return false
		}
	}
	return true
}

// TestClientLinksNoServer: the Go client runs inside a training process,
// and the Python package loads it as a shared library; neither may carry a
// Raft store, gossip or any of the node's packages.
func TestClientLinksNoServer(t *testing.T) {
	for _, pkg := range []string{"client", "cmd/libfeedmesh"} {
		g := load(t, pkg)
		forbid(t, g, "a server library: the client never runs Raft or gossip", server)
		forbid(t, g, "not a client-side package: "+strings.Join(clientSide, ", "), outsideClientSide)
	}
}

// TestProductLinksNoTestCode: the feedmesh binary carries no test,
// benchmark or fault-injection code. hashicorp/raft's own testing helpers
// import "testing"; nothing else may.
func TestProductLinksNoTestCode(t *testing.T) {
	g := load(t, "cmd/feedmesh")
	var importers []string
	for p, imps := range g.imports {
		if slices.Contains(imps, "testing") && p != "github.com/hashicorp/raft" {
			importers = append(importers, p)
		}
	}
	slices.Sort(importers)
	for _, p := range importers {
		t.Errorf("cmd/feedmesh links testing through %s: %s", p, g.chain(p))
	}
	// internal/slowlink is linked only by -tags feedmesh_testhooks
	// (systemtest/multihost's build); deploy holds the image's packer.
	testOnly := []string{"testcluster", "internal/testutil", "systemtest", "bench", "cmd/feedmesh-bench", "internal/s3test", "internal/slowlink", "internal/pqshard", "internal/pairwise", "internal/deptest", "internal/fsm/fsmtest", "deploy"}
	forbid(t, g, "test, benchmark or fault-injection code", func(p string) bool {
		for _, s := range testOnly {
			if under(p, module+"/"+s) {
				return true
			}
		}
		return false
	})
	// Helm and the Kubernetes API types check the chart in tests, from
	// tools/helm, a module of their own.
	forbid(t, g, "a deployment tool", func(p string) bool {
		for _, s := range []string{"helm.sh/", "k8s.io/", "sigs.k8s.io/", "github.com/prometheus-operator/"} {
			if strings.HasPrefix(p, s) {
				return true
			}
		}
		return false
	})
}

// TestPureCores: the deciding logic is pure (no goroutines, clocks or
// sockets of its own) and light: it links no network stack, Raft, gossip
// or QUIC, so it is tested by tables, properties and fuzzing alone.
func TestPureCores(t *testing.T) {
	heavy := func(p string) bool {
		return server(p) || p == "net" || strings.HasPrefix(p, "github.com/quic-go/") || under(p, module+"/transport")
	}
	// internal/fsm is the replicated state machine and internal/plan the
	// leader's planners: the Raft shell around them is internal/raftnode.
	for _, pkg := range []string{"ranges", "tensor", "api/rounds", "api/jobspec", "internal/splits", "internal/share", "internal/order", "pipeline/bucketing",
		"internal/fsm", "internal/plan", "internal/plan/autoscale"} {
		forbid(t, load(t, pkg), "a pure core links no network, Raft or gossip", heavy)
	}
	for _, pkg := range []string{"ranges", "api/rounds", "api/jobspec", "internal/plan/autoscale", "internal/version", "internal/order"} {
		g := load(t, pkg)
		forbid(t, g, fmt.Sprintf("%s is a leaf: it imports nothing of the module", pkg), func(p string) bool {
			return under(p, module) && p != g.root
		})
	}
}
