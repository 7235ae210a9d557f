package mesh

import "github.com/feedmesh/feedmesh/internal/fsm"

// clusterProtocol is the cluster's protocol level (fsm.Protocol*): the
// least level the servers of the Raft configuration advertise through
// gossip, a server this node does not know, or that advertises none,
// counting as fsm.ProtocolLegacy. Every node computes it alike from
// gossip, and writes at that level (protocolLoop): during a rolling
// upgrade the new nodes keep proposing commands, and writing snapshots,
// that the old ones apply and restore; once every server runs the new
// release, the cluster moves up.
func (n *Node) clusterProtocol() int {
	cfg, err := n.raft.Configuration()
	if err != nil || len(cfg) == 0 {
		return fsm.Protocol
	}
	levels := map[string]int{}
	for _, m := range n.members.snapshot() {
		levels[m.Name] = m.Protocol
	}
	level := fsm.Protocol
	for _, s := range cfg {
		l := fsm.ProtocolLegacy
		if s.ID == n.name {
			l = fsm.Protocol
		} else if v, ok := levels[s.ID]; ok {
			l = v
		}
		level = min(level, l)
	}
	return level
}

// updateProtocol sets the level this node writes at, and logs a change.
func (n *Node) updateProtocol() {
	level := n.clusterProtocol()
	if old := n.raft.Protocol(); old != level {
		n.raft.SetProtocol(level)
		n.log.Info("cluster protocol level", "level", level, "was", old, "this_release", fsm.Protocol)
	}
}
