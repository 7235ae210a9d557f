package mesh_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
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

// TestStrangerWithStolenGossipKeyIsNotAdmitted (issue 36): under mutual
// TLS, a stranger running the stock binary with the cluster's gossip key
// but no node certificate of the cluster (dev mode: a self-signed one)
// joins the gossip mesh: the members' check of its QUIC address fails, so
// it is never admitted, gets no voter slot and serves no job.
func TestStrangerWithStolenGossipKeyIsNotAdmitted(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	p := newTestPKI(t)
	certs := map[int][2]string{}
	for i := range 3 {
		crt, k := p.issue(t, transport.RoleNode, nodeName(i))
		certs[i] = [2]string{crt, k}
	}
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = p.caFile, certs[i][0], certs[i][1]
		cfg.GossipKey = key
	}))
	_, l := c.WaitLeader(t, 20*time.Second)
	voters := len(l.Status().Voters)

	cfg := singleNode(t)
	cfg.Name = "aaaa-stranger" // sorts first: the voter planner's favourite
	cfg.GossipKey = key
	cfg.Join = []string{c.Node(0).GossipAddr()}
	stranger, err := startOrErr(t, cfg)
	if err != nil {
		t.Fatalf("the stranger did not start: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, i := range c.Running() {
			for _, m := range c.Node(i).Members() {
				if m.Name == stranger.Name() {
					t.Fatalf("%s admitted the stranger: %+v", c.Name(i), m)
				}
			}
		}
		// A loaded machine may move the leadership between the three
		// (seen at load 9): what must never happen is the stranger
		// leading, voting, or taking a fourth voter slot.
		for _, i := range c.Running() {
			st := c.Node(i).Status()
			if st.Leader == stranger.Name() || len(st.Voters) > voters || slices.ContainsFunc(st.Voters, func(v api.Voter) bool { return v.ID == stranger.Name() }) {
				t.Fatalf("%s: the stranger got in: leader %q, voters %v", c.Name(i), st.Leader, st.Voters)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
