package raftnode

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/feedmesh/feedmesh/transport"
)

type recordFSM struct {
	mu      sync.Mutex
	entries []string
}

func (f *recordFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, string(l.Data))
	return len(f.entries)
}

func (f *recordFSM) has(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.entries, s)
}

func (f *recordFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (f *recordFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (nopSnapshot) Release()                             {}

// TestRaftClusterOverQUIC runs a 3-node hashicorp/raft cluster whose
// NetworkTransports use StreamLayer streams: it elects a leader and replicates
// an entry to every node, then survives the leader's shutdown.
func TestRaftClusterOverQUIC(t *testing.T) {
	const n = 3
	type member struct {
		node  *quicNode
		trans *raft.NetworkTransport
		raft  *raft.Raft
		fsm   *recordFSM
	}
	ms := make([]*member, n)
	var servers []raft.Server
	for i := range ms {
		nd := startQUIC(t)
		ms[i] = &member{node: nd, fsm: &recordFSM{}}
		ms[i].trans = raft.NewNetworkTransport(StreamLayer(nd.t, nd.t.Addr(), nil), 3, 2*time.Second, io.Discard)
		servers = append(servers, raft.Server{ID: raft.ServerID(nd.addr()), Address: raft.ServerAddress(nd.addr())})
	}
	for _, m := range ms {
		cfg := raft.DefaultConfig()
		cfg.LocalID = raft.ServerID(m.node.addr())
		cfg.HeartbeatTimeout = 200 * time.Millisecond
		cfg.ElectionTimeout = 200 * time.Millisecond
		cfg.LeaderLeaseTimeout = 100 * time.Millisecond
		cfg.CommitTimeout = 10 * time.Millisecond
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
		store := raft.NewInmemStore()
		r, err := raft.NewRaft(cfg, m.fsm, store, store, raft.NewInmemSnapshotStore(), m.trans)
		if err != nil {
			t.Fatal(err)
		}
		m.raft = r
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			t.Fatal(err)
		}
	}
	shutdown := func(m *member) {
		if m.raft != nil {
			m.raft.Shutdown().Error()
			m.trans.Close()
			m.raft = nil
		}
	}
	t.Cleanup(func() {
		for _, m := range ms {
			shutdown(m)
		}
	})
	leader := func(among []*member) *member {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, m := range among {
				if m.raft.State() == raft.Leader {
					return m
				}
			}
			time.Sleep(20 * time.Millisecond) // polling raft state, bounded by deadline
		}
		t.Fatal("no leader elected within 10s")
		return nil
	}
	replicated := func(among []*member, entry string) {
		deadline := time.Now().Add(10 * time.Second)
		for _, m := range among {
			for !m.fsm.has(entry) {
				if time.Now().After(deadline) {
					t.Fatalf("entry %q not applied on %s", entry, m.node.addr())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}

	l := leader(ms)
	if err := l.raft.Apply([]byte("first"), 5*time.Second).Error(); err != nil {
		t.Fatalf("apply on leader: %v", err)
	}
	replicated(ms, "first")

	// Leader fails over to the two others, which keep replicating.
	shutdown(l)
	var rest []*member
	for _, m := range ms {
		if m != l {
			rest = append(rest, m)
		}
	}
	l2 := leader(rest)
	if err := l2.raft.Apply([]byte("second"), 5*time.Second).Error(); err != nil {
		t.Fatalf("apply on new leader: %v", err)
	}
	replicated(rest, "second")
}

// quicNode is one QUIC transport on loopback.
type quicNode struct{ t *transport.Transport }

func (n *quicNode) addr() string { return n.t.Addr().String() }

func startQUIC(tb testing.TB) *quicNode {
	tb.Helper()
	serverTLS, clientTLS, err := transport.DevTLS(tb.TempDir(), "test-node")
	if err != nil {
		tb.Fatal(err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	t, err := transport.New(udp, serverTLS, clientTLS, transport.FastConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		udp.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { t.Close(); udp.Close() })
	return &quicNode{t: t}
}
