package mesh_test

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// forgeAppendEntries sends every node of c, from a stranger's QUIC
// transport that uses clientTLS, AppendEntries in the name of a leader of
// a much higher term, as raft's own transport would: what the security
// review sent (one such message made a leader step down; bursts drove the
// term from 4 to 29 in 12 s). It returns how many the nodes answered.
func forgeAppendEntries(t *testing.T, c *testcluster.Cluster, clientTLS func() *transport.Transport, term uint64) int {
	t.Helper()
	tr := clientTLS()
	layer := raftnode.StreamLayer(tr, tr.Addr(), nil)
	nt := raft.NewNetworkTransport(layer, 1, 2*time.Second, io.Discard)
	defer nt.Close()
	answered := 0
	for round := 0; round < 3; round++ {
		for _, i := range c.Running() {
			addr := raft.ServerAddress(c.Node(i).Addr())
			req := raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte(tr.Addr().String())},
				Term:      term,
			}
			var resp raft.AppendEntriesResponse
			if err := nt.AppendEntries("stranger-target", addr, &req, &resp); err == nil {
				answered++
			}
		}
	}
	return answered
}

func strangerTransport(t *testing.T, tlsConf func() (*transport.Transport, error)) func() *transport.Transport {
	return func() *transport.Transport {
		tr, err := tlsConf()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
}

func newStranger(t testing.TB, tlsCA, cert, key string) (*transport.Transport, error) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { pc.Close() })
	ct, err := transport.ClientTLS(tlsCA, cert, key)
	if err != nil {
		return nil, err
	}
	return transport.New(pc, nil, ct, transport.FastConfig(), slog.New(slog.DiscardHandler))
}

// checkRaftUntouched wants the cluster's leader and term as they were.
func checkRaftUntouched(t *testing.T, c *testcluster.Cluster, leader string, term uint64) {
	t.Helper()
	for _, i := range c.Running() {
		st := c.Node(i).Status()
		if st.Term != term || st.Leader != leader {
			t.Errorf("node %s after the forged entries: leader %q term %d, want leader %q term %d", c.Name(i), st.Leader, st.Term, leader, term)
		}
	}
}

// TestStrangerRaftStreamChangesNothing (issue 36): Raft was open to anyone
// who could open a QUIC stream. A stranger's forged AppendEntries of a
// higher term, in dev mode (no identities: it is not a member's address)
// and under mutual TLS with a trainer's client certificate (not a node),
// is refused before Raft reads it: no term moves, the leader stays.
func TestStrangerRaftStreamChangesNothing(t *testing.T) {
	t.Run("dev mode", func(t *testing.T) {
		c := testcluster.Start(t, 3)
		_, l := c.WaitLeader(t, 20*time.Second)
		st := l.Status()
		got := forgeAppendEntries(t, c, strangerTransport(t, func() (*transport.Transport, error) { return newStranger(t, "", "", "") }), st.Term+10)
		if got != 0 {
			t.Errorf("the nodes answered %d forged AppendEntries, want 0", got)
		}
		checkRaftUntouched(t, c, st.Leader, st.Term)
	})
	t.Run("mutual TLS, a client certificate", func(t *testing.T) {
		p := newTestPKI(t)
		certs := map[int][2]string{}
		for i := range 3 {
			crt, key := p.issue(t, transport.RoleNode, nodeName(i))
			certs[i] = [2]string{crt, key}
		}
		c := testcluster.Start(t, 3, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
			cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = p.caFile, certs[i][0], certs[i][1]
		}))
		_, l := c.WaitLeader(t, 20*time.Second)
		st := l.Status()
		crt, key := p.issue(t, transport.RoleClient, "trainer")
		got := forgeAppendEntries(t, c, strangerTransport(t, func() (*transport.Transport, error) { return newStranger(t, p.caFile, crt, key) }), st.Term+10)
		if got != 0 {
			t.Errorf("the nodes answered %d forged AppendEntries from a client certificate, want 0", got)
		}
		checkRaftUntouched(t, c, st.Leader, st.Term)
	})
}

func nodeName(i int) string { return []string{"node-00", "node-01", "node-02"}[i] }
