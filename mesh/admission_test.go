package mesh_test

import (
	"net"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/testcluster"
)

// fakeMeta is a member's gossip metadata (mesh's nodeMeta: QUIC address,
// Raft role, version) claiming a QUIC address with no node behind it.
type fakeMeta struct {
	Addr    string `cbor:"1,keyasint"`
	Raft    string `cbor:"2,keyasint"`
	Version string `cbor:"3,keyasint"`
}

type fakeDelegate struct{ meta []byte }

func (d fakeDelegate) NodeMeta(int) []byte                  { return d.meta }
func (fakeDelegate) NotifyMsg([]byte)                       {}
func (fakeDelegate) GetBroadcasts(int, int) [][]byte        { return nil }
func (fakeDelegate) LocalState(bool) []byte                 { return nil }
func (fakeDelegate) MergeRemoteState(buf []byte, join bool) {}

// TestFakeMemberIsNotAdmitted (issue 36): a gossip member whose QUIC
// address has no node behind it, with a name that sorts first, joined to a
// single-node cluster. Before admission it became a member, the voter
// planner gave it a voter slot, and the cluster lost its leader for good
// (two voters, one of them nobody). Now it is never admitted: the node
// keeps one member and its leader.
func TestFakeMemberIsNotAdmitted(t *testing.T) {
	c := testcluster.Start(t, 1)
	_, n := c.WaitLeader(t, 10*time.Second)
	nobody, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // an address nothing answers QUIC on
	if err != nil {
		t.Fatal(err)
	}
	defer nobody.Close()
	meta, err := cbor.Marshal(fakeMeta{Addr: nobody.LocalAddr().String(), Raft: "none", Version: "0.1.0.dev0"})
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = "aaaa-fake", "127.0.0.1", 0, 0
	mc.Delegate = fakeDelegate{meta: meta}
	mc.LogOutput = testWriter{t}
	fake, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Shutdown()
	if _, err := fake.Join([]string{n.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	// Long enough for the voter planner to act on a member (the fast
	// preset reconciles every 100 ms) and for the check to fail.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range n.Members() {
			if m.Name == "aaaa-fake" {
				t.Fatalf("the fake member was admitted: %+v", m)
			}
		}
		if st := n.Status(); st.Leader != n.Name() || len(st.Voters) != 1 {
			t.Fatalf("the node lost its leadership or its voters changed: leader %q, voters %v", st.Leader, st.Voters)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { return len(p), nil }
