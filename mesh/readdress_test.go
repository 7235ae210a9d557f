package mesh_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
)

// freeUDPPort is a UDP port free on loopback.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	return u.LocalAddr().(*net.UDPAddr).Port
}

// TestVotersComeBackAtNewAddresses (issue 43): a pod that Kubernetes
// starts again gets a new IP, so a voter's Raft address changes while its
// name and data dir stay. Three voters are killed and started again, each
// on a new QUIC address: first one (the others must reach it at its new
// address and it must catch up), then all three at once (as after a
// cluster-wide restart: every address in every node's Raft configuration
// is stale, and no leader exists to change it). Raft dials a voter at the
// address gossip advertises for its name (raftnode's AddressOf), and the
// leader rewrites the configuration's stale addresses. Before, Raft
// dialled the configuration's addresses: a single moved voter stopped
// replicating for good (alive to gossip, never replaced), and after the
// restart of all no leader was ever elected.
func TestVotersComeBackAtNewAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a cluster twice")
	}
	const n = 3
	dir := t.TempDir()
	gossip := make([]int, n)
	ips := []string{"127.0.0.1"}
	for i := range gossip {
		gossip[i] = freeGossipPort(t, ips)
	}
	var joins []string
	for _, p := range gossip {
		joins = append(joins, "127.0.0.1:"+strconv.Itoa(p))
	}
	nodes := make([]*mesh.Node, n)
	defer func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Kill()
			}
		}
	}()
	start := func(i int) {
		t.Helper()
		cfg := mesh.FastConfig()
		cfg.Name = fmt.Sprintf("mv%d", i)
		cfg.DataDir = fmt.Sprintf("%s/%d", dir, i)
		cfg.GossipPort, cfg.Port = gossip[i], freeUDPPort(t)
		cfg.Join = joins
		cfg.BootstrapExpect = n
		cfg.RaftVoters = n
		cfg.VoterGrace = time.Minute // never replaced: it must come back
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nd, err := mesh.Start(ctx, cfg)
		if err != nil {
			t.Fatalf("start %s: %v", cfg.Name, err)
		}
		nodes[i] = nd
	}
	for i := range n {
		start(i)
	}
	leader := func() *mesh.Node {
		for _, nd := range nodes {
			if nd != nil && nd.Raft().IsLeader() {
				return nd
			}
		}
		return nil
	}
	put := func(key string) (uint64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return nodes[0].Put(ctx, key, []byte("v"))
	}
	waitFor := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		t0 := time.Now()
		for !cond() {
			if time.Since(t0) > within {
				for _, nd := range nodes {
					st := nd.Status()
					t.Logf("%s at %s: role %s, leader %q, applied %d, voters %v", nd.Name(), nd.Addr(), st.Role, st.Leader, st.AppliedIndex, st.Voters)
				}
				t.Fatalf("%s: not within %v", what, within)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(t0)
	}
	waitFor("formed", 20*time.Second, func() bool { _, err := put("formed"); return err == nil })

	// One voter, not the leader, comes back at a new address.
	moved := 0
	for i, nd := range nodes {
		if nd != leader() {
			moved = i
		}
	}
	nodes[moved].Kill()
	nodes[moved] = nil
	start(moved)
	// One entry committed after the restart (by the other two), then the
	// moved voter applies it: it is replicated to at its new address. (A
	// new entry each poll would measure the race between the follower's
	// apply and the leader's commit, which a loaded machine loses.)
	var idx uint64
	took := waitFor(fmt.Sprintf("%s caught up at its new address", nodes[moved].Name()), 20*time.Second, func() bool {
		if idx == 0 {
			i, err := put("after-move")
			if err != nil {
				return false
			}
			idx = i
		}
		return nodes[moved].Status().AppliedIndex >= idx
	})
	t.Logf("%s restarted at %s: replicating again after %v", nodes[moved].Name(), nodes[moved].Addr(), took.Round(time.Millisecond))
	waitFor("the configuration names its new address", 10*time.Second, func() bool {
		l := leader()
		if l == nil {
			return false
		}
		for _, v := range l.Status().Voters {
			if v.ID == nodes[moved].Name() {
				return v.Addr == nodes[moved].Addr()
			}
		}
		return false
	})

	// Every voter comes back at a new address.
	for i := range nodes {
		nodes[i].Kill()
		nodes[i] = nil
	}
	for i := range n {
		start(i)
	}
	took = waitFor("a leader after all voters moved", 30*time.Second, func() bool { _, err := put("after-all"); return err == nil })
	t.Logf("all %d voters restarted at new addresses: a leader and a commit after %v", n, took.Round(time.Millisecond))
}
