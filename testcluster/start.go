package testcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/localcluster"
)

// Cluster is a set of in-process nodes on loopback: a localcluster.Cluster
// with WaitFor, which fails the test, and faults: Partition, Isolate, Heal.
type Cluster struct {
	*localcluster.Cluster
	net *faultNet
}

// Option changes how Start builds the cluster.
type Option = localcluster.Option

// WithVoters sets the Raft voter target (mesh.Config.RaftVoters); the
// default is mesh.AutoVoters, as for a node started by hand.
func WithVoters(n int) Option { return localcluster.WithVoters(n) }

// WithConfig edits each node's config before it starts.
func WithConfig(f func(i int, c *mesh.Config)) Option { return localcluster.WithConfig(f) }

// Start runs n nodes with mesh.FastConfig (node logs go to t.Log when
// FEEDMESH_TEST_LOGS=debug|info|warn is set), waits until every node sees n
// alive members and the cluster has a leader, and registers Close with
// t.Cleanup. It fails the test if the cluster does not form.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	f := newFaultNet()
	all := append(append([]Option{localcluster.WithLogOutput(testWriter{t})}, f.options()...), opts...)
	c, err := localcluster.New(t.TempDir(), n, all...)
	if c != nil {
		t.Cleanup(c.Close)
	}
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return &Cluster{Cluster: c, net: f}
}

// WaitFor polls cond until it holds or timeout passes; then it fails the
// test naming what was awaited.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := c.Wait(timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// WaitLeader waits until the running nodes agree on one leader and
// returns it; it fails the test after timeout. Cluster.Leader alone
// returns none for a moment during an election (or while a deposed
// leader has not yet stepped down), which a test on loaded cores does
// see.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) (int, *mesh.Node) {
	t.Helper()
	var (
		idx  int
		node *mesh.Node
	)
	c.WaitFor(t, timeout, "one leader", func() bool {
		idx, node = c.Leader()
		return node != nil
	})
	return idx, node
}

// Poll evaluates cond every few milliseconds until it returns true (true)
// or timeout passes (false).
func Poll(timeout time.Duration, cond func() bool) bool { return localcluster.Poll(timeout, cond) }

// testWriter routes node logs (when enabled) to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
