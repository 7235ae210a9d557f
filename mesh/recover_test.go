package mesh_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

// A 3-voter cluster loses 2 voters for good: the survivor alone has no
// quorum. Stopped and recovered, it restarts as the only voter, becomes
// leader, takes writes and still holds what was written before.
func TestRecoverAfterLosingQuorum(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithVoters(3))
	li, leader := c.Leader()
	put(t, leader, "before", "quorum loss")
	s := (li + 1) % 3
	c.WaitFor(t, 5*time.Second, "the survivor to have the write", func() bool {
		v, ok := c.Node(s).Raft().Get("before")
		return ok && string(v) == "quorum loss"
	})
	for i := range 3 {
		if i != s {
			c.Kill(i)
		}
	}
	if tryPut(c.Node(s), "no-quorum", "x") {
		t.Fatal("a write committed with 1 of 3 voters")
	}

	// A running node's data dir is refused, and left untouched.
	dir := c.DataDir(s)
	if _, err := mesh.Recover([]string{dir}, nil, nil); !errors.Is(err, raftnode.ErrDataDirInUse) {
		t.Fatalf("recover on a running node: err = %v, want ErrDataDirInUse", err)
	}

	c.Kill(s)
	res, err := mesh.Recover([]string{dir}, nil, nil)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if len(res) != 1 || res[0].Name != c.Name(s) || len(res[0].Before) != 3 || len(res[0].After) != 1 ||
		res[0].After[0].ID != c.Name(s) || res[0].After[0].Addr == "" {
		t.Fatalf("recover result %+v, want %s as the only voter of 3", res, c.Name(s))
	}
	t.Logf("recovered %s: %v -> %v, last index %d", res[0].Name, res[0].Before, res[0].After, res[0].LastIndex)

	if err := c.Restart(s); err != nil {
		t.Fatal(err)
	}
	n := c.Node(s)
	c.WaitFor(t, 10*time.Second, "the survivor to lead alone and commit a put", func() bool {
		return n.Raft().IsLeader() && tryPut(n, "after", "recovered")
	})
	if v, ok := n.Raft().Get("before"); !ok || string(v) != "quorum loss" {
		t.Fatalf("value written before the loss: %q %v", v, ok)
	}
	if got := voterIDs(n.Status().Voters); !slices.Equal(got, []string{c.Name(s)}) {
		t.Fatalf("voters %v, want only %s", got, c.Name(s))
	}

	// New nodes join (the lost ones would come back with new data dirs):
	// the leader grows the voter set back to 3.
	for range 2 {
		if _, err := c.Add(); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(t, 10*time.Second, "3 voters again", func() bool { return countVoters(c) == 3 })
	_, l := c.Leader()
	put(t, l, "regrown", "ok")
}
