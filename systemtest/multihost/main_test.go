// Package multihost runs feedmesh across hosts on one machine (issue 43,
// item 7): node processes in network namespaces of their own, each with
// its own IP on a bridge, joining by a DNS name that a test DNS server
// answers, under mutual TLS and a gossip key made with `feedmesh tls`,
// with a delay with jitter on each link (added in user space: the binary
// is built with -tags feedmesh_testhooks; this kernel has no netem) and a
// tbf rate limit on each node's interface. It needs root and iproute2
// (ip, tc) and skips, saying so, without them; -short skips it.
package multihost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "feedmesh-multihost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var built struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// feedmeshBinary builds cmd/feedmesh with its test hooks (the link delay)
// once per test run.
func feedmeshBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		path := filepath.Join(binDir, "feedmesh")
		built.out, built.err = exec.Command("go", "build", "-tags", "feedmesh_testhooks", "-o", path, "github.com/feedmesh/feedmesh/cmd/feedmesh").CombinedOutput()
		built.path = path
	})
	if built.err != nil {
		t.Fatalf("go build -tags feedmesh_testhooks ./cmd/feedmesh: %v\n%s", built.err, built.out)
	}
	return built.path
}
