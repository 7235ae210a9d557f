package localcluster

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
)

// Option changes how New builds the cluster.
type Option func(*options)

type options struct {
	voters    int
	expect    int
	configure []func(i int, c *mesh.Config)
	started   []func(i int, n *mesh.Node)
	logLevel  slog.Level
	logs      bool
	logOut    io.Writer
	timeout   time.Duration
	ctx       context.Context
	scaled    bool // WithScaledGossip
	joinAll   bool // WithJoinAll
	size      int  // the n New was asked for
}

// WithVoters sets the Raft voter target (mesh.Config.RaftVoters); the
// default is mesh.AutoVoters, as for a node started by hand.
func WithVoters(n int) Option { return func(o *options) { o.voters = n } }

// WithConfig edits each node's config before it starts (every start:
// New, Restart, RestartNoJoin, Add). Several apply in order.
func WithConfig(f func(i int, c *mesh.Config)) Option {
	return func(o *options) { o.configure = append(o.configure, f) }
}

// WithStarted calls f with each node once it has started (every start),
// under the cluster's lock: f must not call the cluster. testcluster's
// fault injection learns the nodes' addresses through it.
func WithStarted(f func(i int, n *mesh.Node)) Option {
	return func(o *options) { o.started = append(o.started, f) }
}

// WithLogOutput sets where node logs go when FEEDMESH_TEST_LOGS=debug|info|warn
// turns them on (stderr by default).
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logOut = w } }

// WithStartTimeout bounds how long Start waits for the cluster to form.
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithScaledGossip gives every node ScaledGossip(FastConfig's timing, n)
// and ScaledTimers for the n New is asked for (before WithConfig's edits):
// in-process nodes share the machine's cores, so FastConfig's timers,
// meant for a handful of nodes, make a hundred nodes' probes, gossip and
// polls alone load a 2-core machine.
func WithScaledGossip() Option { return func(o *options) { o.scaled = true } }

// WithJoinAll makes a starting node join every running node, as
// localcluster did before maxJoin bounded it (the scale benchmark's
// before/after).
func WithJoinAll() Option { return func(o *options) { o.joinAll = true } }

// ScaledGossip is g with its intervals stretched for a cluster of n nodes
// sharing one machine: probe, probe timeout, gossip and push/pull
// intervals and the TCP timeout × max(1, n/10), capped at memberlist's
// LAN defaults (probe 1 s, probe timeout 500 ms, gossip 200 ms, push/pull
// 30 s, TCP 10 s), and the dead members' reconnect interval, capped at
// mesh.DefaultConfig's 10 s. A node's own
// load does not grow with n (memberlist probes one member per interval
// and gossips to a fixed fan-out), but n nodes in one process load it n
// times: stretching by n/10 keeps the process's gossip load that of a
// 10-node cluster, up to the LAN timing that real 100-node clusters use.
// Failure detection slows by the same factor (about 1 s at 10 nodes, 5 s
// at 100 with mesh.FastConfig).
func ScaledGossip(g mesh.GossipConfig, n int) mesh.GossipConfig {
	f := max(1, float64(n)/10)
	stretch := func(d, limit time.Duration) time.Duration {
		return max(d, min(time.Duration(float64(d)*f), limit))
	}
	g.ProbeInterval = stretch(g.ProbeInterval, time.Second)
	g.ProbeTimeout = stretch(g.ProbeTimeout, 500*time.Millisecond)
	g.GossipInterval = stretch(g.GossipInterval, 200*time.Millisecond)
	g.PushPullInterval = stretch(g.PushPullInterval, 30*time.Second)
	g.TCPTimeout = stretch(g.TCPTimeout, 10*time.Second)
	// Each node looks through its member table for dead members to
	// retry every ReconnectInterval: n nodes × n members.
	g.ReconnectInterval = stretch(g.ReconnectInterval, mesh.DefaultConfig().Gossip.ReconnectInterval)
	return g
}

// ScaledTimers stretches, as ScaledGossip does, the timers every node of
// c runs whatever it does, for a cluster of n nodes sharing one machine:
// the worker's job poll (each a request to the leader: n of them every
// JobPollInterval), the reconcile loops (role, formation, voters, job
// planning) and the known-members check, × max(1, n/10), capped at
// mesh.DefaultConfig's (the production timing). A 100-node cluster of
// FastConfig nodes otherwise sends its leader 500 job polls a second.
func ScaledTimers(c mesh.Config, n int) mesh.Config {
	f := max(1, float64(n)/10)
	def := mesh.DefaultConfig()
	stretch := func(d, limit time.Duration) time.Duration {
		return max(d, min(time.Duration(float64(d)*f), limit))
	}
	c.Worker.JobPollInterval = stretch(c.Worker.JobPollInterval, def.Worker.JobPollInterval)
	c.ReconcileInterval = stretch(c.ReconcileInterval, def.ReconcileInterval)
	c.KnownMembersInterval = stretch(c.KnownMembersInterval, def.KnownMembersInterval)
	return c
}

// WithContext makes New, the node starts (New, Restart, Add) and Wait
// give up once ctx is done: a program that starts a cluster stops on a
// signal within one node start instead of forming the whole cluster
// first. Without it, none of them can be cancelled.
func WithContext(ctx context.Context) Option { return func(o *options) { o.ctx = ctx } }
