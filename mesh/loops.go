package mesh

import (
	"context"
	"errors"
	"math/rand/v2"

	"time"

	"github.com/hashicorp/raft"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/plan"
)

// formationLoop bootstraps Raft the first time the cluster forms: alone in
// dev mode, or, with BootstrapExpect, together with the other lowest-named
// members once enough of them are seen (Consul's bootstrap_expect). A node
// restarted with Raft state never bootstraps again, nor does a node whose
// data dir records other members (knownmembers.go).
func (n *Node) formationLoop() {
	defer n.wg.Done()
	if n.raft.HasState() {
		return
	}
	if n.cfg.BootstrapExpect == 0 {
		if n.knewOthers {
			// Restarted without --join (and without Raft state: it was not
			// a voter) by a node that was part of a cluster: it rejoins
			// the members it knew rather than start a cluster of its own.
			n.log.Info("not bootstrapping alone: the data dir records other members", "file", knownMembersFile)
			return
		}
		if len(n.cfg.Join) == 0 {
			self := []plan.Server{{ID: n.name, Addr: n.addr}}
			if err := n.raft.Bootstrap(self); err != nil {
				n.log.Error("bootstrap single-node cluster", "err", err)
			} else {
				n.log.Info("bootstrapped single-node cluster (dev mode)")
			}
		}
		return
	}
	ticker := time.NewTicker(n.cfg.ReconcileInterval)
	defer ticker.Stop()
	for {
		if leader, _ := n.raft.Leader(); leader != "" {
			return // the cluster formed without us, or we were added
		}
		if n.admit != nil && n.admit.checking() {
			// A member gossip told of is being checked (admission.go):
			// bootstrapping on the view without it could pick other
			// voters than the nodes that see it.
			select {
			case <-ticker.C:
				continue
			case <-n.ctx.Done():
				return
			}
		}
		members := n.Members()
		if formed(members, n.name) {
			// A member already leads a cluster (we are a fresh node joining
			// it, perhaps after losing our data dir): bootstrapping now would
			// start a second cluster. Wait to be promoted instead.
			n.log.Info("cluster already formed; not bootstrapping")
			return
		}
		voters, ok := plan.BootstrapPlan(n.name, n.cfg.BootstrapExpect, raftMembers(members))
		if ok {
			if err := n.raft.Bootstrap(voters); errors.Is(err, raft.ErrCantBootstrap) {
				// Peers that bootstrapped first already replicated the
				// configuration to us: we are in the cluster.
				n.log.Info("joined a cluster that formed first", "voters", voters)
			} else if err != nil {
				n.log.Error("bootstrap", "voters", voters, "err", err)
			} else {
				n.log.Info("bootstrapped raft", "voters", voters)
			}
			return
		}
		if len(voters) > 0 {
			// Enough members are here and we are not among the lowest names:
			// we stay a non-voter until the leader promotes us.
			return
		}
		select {
		case <-n.ctx.Done():
			return
		case <-n.members.changed:
		case <-ticker.C:
		}
	}
}

// voterLoop runs on every node but acts only on the leader: it keeps the
// voter set at RaftVoters (with AutoVoters: 3, or 5 from 5 live members on)
// by promoting live members and removing voters that have been dead past
// VoterGrace, as plan.PlanVoters decides.
func (n *Node) voterLoop() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.ReconcileInterval)
	defer ticker.Stop()
	lastTarget := 0
	// staleSince is when this leader first found each stale server
	// (plan.StaleServers); it adds one back once it has stayed stale for
	// staleSettle, long enough for a server that rule 5 removed while live
	// to advertise that it is out.
	staleSince := map[string]time.Time{}
	staleSettle := 2 * n.cfg.ReconcileInterval
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-ticker.C:
		}
		if !n.raft.IsLeader() {
			clear(staleSince)
			continue
		}
		cfg, err := n.raft.Configuration()
		if err != nil {
			n.log.Warn("read raft configuration", "err", err)
			continue
		}
		members := raftMembers(n.Members())
		if t := plan.VoterTarget(n.cfg.RaftVoters, n.name, cfg, members); t != lastTarget {
			n.log.Info("voter target", "voters", t, "auto", n.cfg.RaftVoters == AutoVoters)
			lastTarget = t
		}
		n.readdressVoters(cfg)
		changes := plan.PlanVoters(n.cfg.RaftVoters, n.cfg.VoterGrace, time.Now(), n.name, cfg, members)
		for _, ch := range changes {
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
			switch ch.Kind {
			case plan.AddVoter:
				err = n.raft.AddVoter(ctx, ch.Server)
			case plan.RemoveServer:
				err = n.raft.RemoveServer(ctx, ch.Server.ID)
			}
			cancel()
			if err != nil {
				n.log.Warn("voter change failed", "change", ch, "err", err)
				break
			}
			n.log.Info("voter change", "change", ch)
		}
		n.addStale(cfg, staleSince, staleSettle)
	}
}

// addStale adds back, as nonvoters, the live members that still hold a
// configuration naming them but are not in the leader's cfg, once each has
// been so for settle (plan.StaleServers): a voter removed while it was
// down and restarted since. Without this it ran elections nobody answered
// and knew no leader until the voter target next had room for it (seen:
// 86 s, and for good while the target stays met). The roles come from
// what each member advertises, not from cfg (Members overrides them).
func (n *Node) addStale(cfg []plan.ConfigServer, since map[string]time.Time, settle time.Duration) {
	now := time.Now()
	stale := plan.StaleServers(cfg, raftMembers(n.members.snapshot()))
	found := make(map[string]bool, len(stale))
	for _, s := range stale {
		found[s.ID] = true
		first, ok := since[s.ID]
		if !ok {
			since[s.ID] = now
			continue
		}
		if now.Sub(first) < settle {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
		err := n.raft.AddNonvoter(ctx, s)
		cancel()
		if err != nil {
			n.log.Warn("adding back a server with a stale configuration failed", "server", s.ID, "err", err)
			return
		}
		delete(since, s.ID)
		n.log.Info("added back as a nonvoter a server that holds a stale configuration (removed while down)", "server", s.ID, "addr", s.Addr)
	}
	for id := range since {
		if !found[id] {
			delete(since, id)
		}
	}
}

// readdressVoters, on the leader, rewrites the address of a voter that
// gossip holds alive at another address than the configuration records (a
// node started again at a new IP, as a Kubernetes pod is): Raft reaches it
// at the new one already (raftnode's AddressOf); this keeps the
// configuration, and `status`, true. AddVoter of a voter's id with another
// address changes only the address.
func (n *Node) readdressVoters(cfg []plan.ConfigServer) {
	for _, s := range cfg {
		if s.Suffrage != plan.SuffrageVoter || s.ID == n.name {
			continue
		}
		addr, ok := n.members.addrOf(s.ID)
		if !ok || addr == s.Addr {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
		err := n.raft.AddVoter(ctx, plan.Server{ID: s.ID, Addr: addr})
		cancel()
		if err != nil {
			n.log.Warn("voter address change failed", "voter", s.ID, "from", s.Addr, "to", addr, "err", err)
			return
		}
		n.log.Info("voter address changed", "voter", s.ID, "from", s.Addr, "to", addr)
	}
}

// roleLoop keeps the Raft role this node advertises through gossip current,
// so any node can answer `members` with every member's role.
func (n *Node) roleLoop() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.ReconcileInterval)
	defer ticker.Stop()
	current := "none"
	for {
		n.updateProtocol()
		if role := n.raft.Status().Role; role != current {
			if err := n.setMeta(role); err != nil {
				n.log.Error("advertise raft role", "err", err)
			} else {
				// UpdateNode queues the broadcast before it waits for it, so
				// a timeout here only means gossip has not sent it yet.
				if err := n.ml.UpdateNode(n.cfg.ReconcileInterval); err != nil {
					n.log.Debug("gossip raft role", "err", err)
				}
				current = role
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-ticker.C:
		case <-n.raft.LeaderCh():
		}
	}
}

// formed reports whether another live member advertises itself as leader.
func formed(members []api.Member, self string) bool {
	for _, m := range members {
		if m.Name != self && m.Raft == "leader" && (m.Status == api.StatusAlive || m.Status == api.StatusSuspect) {
			return true
		}
	}
	return false
}

// reconnectLoop rejoins, every Gossip.ReconnectInterval, one member held
// dead (not left) for less than ReconnectTimeout: a push/pull with it merges
// the two sides of a healed partition, whose members would otherwise hold
// each other dead for good once GossipToTheDeadTime has passed.
func (n *Node) reconnectLoop() {
	defer n.wg.Done()
	every := n.cfg.Gossip.ReconnectInterval
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		var dead []api.Member
		for _, m := range n.members.snapshot() {
			if m.Status == api.StatusDead && m.Name != n.name && m.GossipAddr != "" && time.Since(m.Since) < n.cfg.Gossip.ReconnectTimeout {
				dead = append(dead, m)
			}
		}
		if len(dead) == 0 || n.leaving.Load() {
			continue
		}
		m := dead[rand.IntN(len(dead))]
		if _, err := n.ml.Join([]string{m.GossipAddr}); err != nil {
			n.log.Debug("reconnect to dead member failed", "member", m.Name, "addr", m.GossipAddr, "err", err)
		} else {
			n.log.Info("reconnected to a member held dead", "member", m.Name, "addr", m.GossipAddr)
		}
	}
}
