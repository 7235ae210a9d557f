package localcluster

import (
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
)

func TestScaledGossip(t *testing.T) {
	fast := mesh.FastConfig().Gossip
	if got := ScaledGossip(fast, 3); got != fast {
		t.Errorf("3 nodes: %+v, want FastConfig's %+v", got, fast)
	}
	if got := ScaledGossip(fast, 10); got != fast {
		t.Errorf("10 nodes: %+v, want FastConfig's %+v", got, fast)
	}
	got := ScaledGossip(fast, 30)
	if got.ProbeInterval != 3*fast.ProbeInterval || got.GossipInterval != 3*fast.GossipInterval || got.PushPullInterval != 3*fast.PushPullInterval || got.TCPTimeout != 3*fast.TCPTimeout {
		t.Errorf("30 nodes: %+v, want FastConfig's intervals × 3", got)
	}
	// At 100 nodes: memberlist's LAN timing for probes and gossip; at
	// 1000 its push/pull and TCP timeout too, no further.
	for n, pp := range map[int][2]time.Duration{100: {20 * time.Second, 5 * time.Second}, 1000: {30 * time.Second, 10 * time.Second}} {
		got = ScaledGossip(fast, n)
		if got.ProbeInterval != time.Second || got.ProbeTimeout != 500*time.Millisecond || got.GossipInterval != 200*time.Millisecond || got.PushPullInterval != pp[0] || got.TCPTimeout != pp[1] {
			t.Errorf("%d nodes: %+v", n, got)
		}
		if got.SuspicionMult != fast.SuspicionMult || got.GossipToTheDeadTime != fast.GossipToTheDeadTime || got.ReconnectInterval != min(10*time.Second, time.Duration(float64(n)/10*float64(fast.ReconnectInterval))) {
			t.Errorf("%d nodes: changed what it should not: %+v", n, got)
		}
	}
	// Never shorter than given: a slow preset stays as slow.
	def := mesh.DefaultConfig().Gossip
	if got := ScaledGossip(def, 100); got.PushPullInterval < def.PushPullInterval || got.ProbeInterval < def.ProbeInterval {
		t.Errorf("DefaultConfig at 100 nodes got faster: %+v", got)
	}
}

func TestScaledTimers(t *testing.T) {
	fast, def := mesh.FastConfig(), mesh.DefaultConfig()
	if got := ScaledTimers(fast, 10); got.Worker.JobPollInterval != fast.Worker.JobPollInterval || got.ReconcileInterval != fast.ReconcileInterval || got.KnownMembersInterval != fast.KnownMembersInterval {
		t.Errorf("10 nodes changed FastConfig's timers")
	}
	got := ScaledTimers(fast, 30)
	if got.Worker.JobPollInterval != 3*fast.Worker.JobPollInterval || got.ReconcileInterval != 3*fast.ReconcileInterval || got.KnownMembersInterval != 3*fast.KnownMembersInterval {
		t.Errorf("30 nodes: poll %v, reconcile %v, known members %v: want FastConfig's × 3", got.Worker.JobPollInterval, got.ReconcileInterval, got.KnownMembersInterval)
	}
	got = ScaledTimers(fast, 1000)
	if got.Worker.JobPollInterval != def.Worker.JobPollInterval || got.ReconcileInterval != def.ReconcileInterval || got.KnownMembersInterval != def.KnownMembersInterval {
		t.Errorf("1000 nodes: poll %v, reconcile %v, known members %v: want DefaultConfig's", got.Worker.JobPollInterval, got.ReconcileInterval, got.KnownMembersInterval)
	}
	if got.Raft.HeartbeatTimeout != fast.Raft.HeartbeatTimeout || got.Gossip != fast.Gossip || got.Worker.OrphanPollInterval != fast.Worker.OrphanPollInterval {
		t.Error("changed what it should not")
	}
}
