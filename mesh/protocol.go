package mesh

import (
	"sync"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// clusterProtocol is the cluster's protocol level (fsm.Protocol*): the
// least level the servers of the Raft configuration advertise through
// gossip, a server this node does not know, or that advertises none,
// counting as fsm.ProtocolLegacy. Every node computes it alike from
// gossip, and writes at that level (protocolLoop): during a rolling
// upgrade the new nodes keep proposing commands, and writing snapshots,
// that the old ones apply and restore; once every server runs the new
// release, the cluster moves up.
//
// A server gossip no longer lists (dead past the member table's
// retention, while it stays in the configuration: one dead voter of 3
// is kept, internal/plan) counts at the level it last advertised to this
// node: forgetting it would take the whole cluster down to the legacy
// level a day after a voter died.
func (n *Node) clusterProtocol() int {
	cfg, err := n.raft.Configuration()
	if err != nil || len(cfg) == 0 {
		return fsm.Protocol
	}
	levels := map[string]int{}
	for _, m := range n.members.snapshot() {
		levels[m.Name] = m.Protocol
	}
	ids := make([]string, len(cfg))
	for i, s := range cfg {
		ids[i] = s.ID
	}
	n.levels.update(ids, levels)
	level := fsm.Protocol
	for _, s := range cfg {
		l := fsm.ProtocolLegacy
		if s.ID == n.name {
			l = fsm.Protocol
		} else if v, ok := n.levels.get(s.ID); ok {
			l = v
		}
		level = min(level, l)
	}
	return level
}

// levelMemory is the protocol level each Raft server last advertised
// through gossip, for the servers of the configuration only (bounded by
// its size).
type levelMemory struct {
	mu sync.Mutex
	m  map[string]int
}

// update records the levels gossip lists now for the servers ids, and
// forgets servers no longer in the configuration.
func (l *levelMemory) update(ids []string, listed map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make(map[string]int, len(ids))
	for _, id := range ids {
		if v, ok := listed[id]; ok {
			next[id] = v
		} else if v, ok := l.m[id]; ok {
			next[id] = v
		}
	}
	l.m = next
}

func (l *levelMemory) get(id string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[id]
	return v, ok
}

// updateProtocol sets the level this node writes at, and logs a change.
func (n *Node) updateProtocol() {
	level := n.clusterProtocol()
	if old := n.raft.Protocol(); old != level {
		n.raft.SetProtocol(level)
		n.log.Info("cluster protocol level", "level", level, "was", old, "this_release", fsm.Protocol)
	}
}
