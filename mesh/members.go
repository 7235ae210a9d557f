package mesh

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan"
)

type memberEntry struct {
	gossipAddr string
	meta       nodeMeta
	status     string
	since      time.Time
	// leaderSince is when the member last began to advertise itself as
	// the Raft leader (newestLeader).
	leaderSince time.Time
}

// memberTable remembers every member gossip told us about, including the
// dead and departed ones that memberlist.Members no longer lists, so that
// `members` can show them and the voter planner knows how long a voter has
// been down. It is bounded: entries that departed longer than retention ago
// are dropped, and dead ones after the longer of retention and
// deadRetention (the reconnect loop retries them until then).
type memberTable struct {
	log           *slog.Logger
	retention     time.Duration
	deadRetention time.Duration
	changed       chan struct{} // capacity 1: a coalesced "something changed"

	mu       sync.Mutex
	entries  map[string]*memberEntry
	watchers []chan struct{} // more coalesced "something changed", one per watch
}

func newMemberTable(log *slog.Logger, retention, deadRetention time.Duration) *memberTable {
	return &memberTable{
		log:           log,
		retention:     retention,
		deadRetention: max(retention, deadRetention),
		changed:       make(chan struct{}, 1),
		entries:       map[string]*memberEntry{},
	}
}

func (t *memberTable) notify() {
	signal(t.changed)
	t.mu.Lock()
	for _, c := range t.watchers {
		signal(c)
	}
	t.mu.Unlock()
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// watch returns one more coalesced "something changed" signal, for a loop
// other than formation (which reads changed).
func (t *memberTable) watch() <-chan struct{} {
	c := make(chan struct{}, 1)
	t.mu.Lock()
	t.watchers = append(t.watchers, c)
	t.mu.Unlock()
	return c
}

// set records what gossip says of n. memberlist's Node.State is not kept
// current (its live state is private), so the status comes from which event
// fired: join and update mean alive, leave means dead, or left when the
// member announced its departure in its metadata before leaving.
func (t *memberTable) set(n *memberlist.Node, status string) {
	meta, err := decodeMeta(n.Meta)
	if err != nil {
		t.log.Warn("ignoring bad gossip metadata", "member", n.Name, "err", err)
	}
	t.mu.Lock()
	e, ok := t.entries[n.Name]
	if !ok {
		e = &memberEntry{}
		t.entries[n.Name] = e
	}
	if err == nil {
		if meta.Raft == plan.RoleLeader && e.meta.Raft != plan.RoleLeader {
			e.leaderSince = time.Now()
		}
		e.meta = meta
	}
	if status == api.StatusDead && e.meta.Leaving {
		status = api.StatusLeft
	}
	if !ok || e.status != status {
		e.since = time.Now()
	}
	e.gossipAddr = n.Address()
	e.status = status
	t.mu.Unlock()
	t.notify()
}

// NotifyJoin implements memberlist.EventDelegate.
func (t *memberTable) NotifyJoin(n *memberlist.Node) { t.set(n, api.StatusAlive) }

// NotifyLeave implements memberlist.EventDelegate.
func (t *memberTable) NotifyLeave(n *memberlist.Node) {
	t.set(n, api.StatusDead)
	t.log.Info("member down", "member", n.Name)
}

// NotifyUpdate implements memberlist.EventDelegate.
func (t *memberTable) NotifyUpdate(n *memberlist.Node) { t.set(n, api.StatusAlive) }

// newestLeader is the QUIC address of the member, other than self, that
// gossip holds alive and that began to advertise itself as the Raft leader
// most recently; "" if none does. Right after a leader dies, gossip still
// holds it alive, and advertising itself as leader, until it is declared
// dead (~3 s with the default preset), while its successor advertises
// itself as soon as it is elected: the newest claim is the one to believe.
func (t *memberTable) newestLeader(self string) string {
	_, addr := t.newestLeaderMember(self)
	return addr
}

// newestLeaderMember is newestLeader's member: its name and QUIC address.
func (t *memberTable) newestLeaderMember(self string) (name, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var since time.Time
	for n, e := range t.entries {
		if n == self || e.status != api.StatusAlive || e.meta.Raft != plan.RoleLeader {
			continue
		}
		if addr == "" || e.leaderSince.After(since) || (e.leaderSince.Equal(since) && e.meta.Addr < addr) {
			name, addr, since = n, e.meta.Addr, e.leaderSince
		}
	}
	return name, addr
}

// snapshot lists the members, dropping those that departed longer than the
// retention ago, or stayed dead longer than the dead retention.
func (t *memberTable) snapshot() []api.Member {
	now := time.Now()
	t.mu.Lock()
	out := make([]api.Member, 0, len(t.entries))
	for name, e := range t.entries {
		keep := t.retention
		if e.status == api.StatusDead {
			keep = t.deadRetention
		}
		if (e.status == api.StatusDead || e.status == api.StatusLeft) && now.Sub(e.since) > keep {
			delete(t.entries, name)
			continue
		}
		raftRole := e.meta.Raft
		if raftRole == "" {
			raftRole = "none"
		}
		out = append(out, api.Member{
			Name: name, GossipAddr: e.gossipAddr, Addr: e.meta.Addr,
			Status: e.status, Raft: raftRole, Version: e.meta.Version, Worker: !e.meta.NoWorker, Since: e.since, Incarnation: e.meta.Incarnation,
			Protocol: max(e.meta.Protocol, fsm.ProtocolLegacy),
		})
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// addrOf is the QUIC address the member called name advertises, if gossip
// holds it alive or suspect.
func (t *memberTable) addrOf(name string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[name]
	if !ok || e.meta.Addr == "" || (e.status != api.StatusAlive && e.status != api.StatusSuspect) {
		return "", false
	}
	return e.meta.Addr, true
}

// raftMembers converts members to the planner's input. A suspect member
// counts as alive: suspicion is not yet failure.
func raftMembers(ms []api.Member) []plan.Member {
	out := make([]plan.Member, 0, len(ms))
	for _, m := range ms {
		if m.Addr == "" {
			continue // no metadata yet
		}
		rm := plan.Member{ID: m.Name, Addr: m.Addr, Alive: m.Status == api.StatusAlive || m.Status == api.StatusSuspect}
		if rm.Alive && m.Raft != "none" {
			rm.Role = m.Raft
		}
		if !rm.Alive {
			rm.DownSince = m.Since
		}
		out = append(out, rm)
	}
	return out
}

// delegate serves this node's metadata to memberlist.
type delegate struct {
	meta atomic.Pointer[[]byte]
}

func (d *delegate) NodeMeta(limit int) []byte {
	p := d.meta.Load()
	if p == nil || len(*p) > limit {
		return nil
	}
	return *p
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}
