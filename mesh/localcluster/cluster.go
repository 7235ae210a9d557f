package localcluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/mesh"
)

// Cluster is a set of in-process nodes on loopback.
type Cluster struct {
	opts options
	dir  string

	mu    sync.Mutex
	slots []*slot
}

type slot struct {
	index      int
	name, dir  string
	gossipPort int
	port       int
	node       *mesh.Node // nil while down
}

// New runs n nodes with mesh.FastConfig, their data under dir, and waits
// until every node sees n alive members and the cluster has a leader. The
// caller must Close the cluster; on error the returned cluster (if not nil)
// still needs Close.
func New(dir string, n int, opts ...Option) (*Cluster, error) {
	o := options{voters: mesh.AutoVoters, timeout: 20 * time.Second, ctx: context.Background()}
	if lv, ok := envLogLevel(); ok {
		o.logs, o.logLevel = true, lv
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.voters > n {
		o.voters = n
	}
	if o.expect == 0 {
		o.expect = min(n, o.voters)
		if o.voters == mesh.AutoVoters {
			o.expect = min(n, 3) // formation starts with 3; the leader grows it
		}
	}
	if o.logOut == nil {
		o.logOut = os.Stderr
	}
	o.size = n
	c := &Cluster{opts: o, dir: dir}
	for i := 0; i < n; i++ {
		if err := o.ctx.Err(); err != nil {
			return c, fmt.Errorf("localcluster: formation stopped after %d of %d nodes: %w", i, n, err)
		}
		s := c.newSlot(i)
		c.slots = append(c.slots, s)
		expect := o.expect
		if n == 1 {
			expect = 0 // single-node dev mode
		}
		if err := c.start(s, expect); err != nil {
			return c, fmt.Errorf("start %s: %w", s.name, err)
		}
	}
	err := c.Wait(o.timeout, "cluster formation", func() bool {
		if _, l := c.Leader(); l == nil {
			return false
		}
		for _, s := range c.slots {
			ms := s.node.Members()
			if alive(ms) != n || leaders(ms) != 1 {
				return false
			}
		}
		return true
	})
	return c, err
}

func (c *Cluster) newSlot(i int) *slot {
	name := fmt.Sprintf("node-%02d", i)
	return &slot{index: i, name: name, dir: filepath.Join(c.dir, name)}
}

func envLogLevel() (slog.Level, bool) {
	switch os.Getenv("FEEDMESH_TEST_LOGS") {
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn":
		return slog.LevelWarn, true
	}
	return 0, false
}

// leaders counts the members that advertise themselves as Raft leader.
func leaders(ms []api.Member) int {
	k := 0
	for _, m := range ms {
		if m.Raft == "leader" && m.Status == api.StatusAlive {
			k++
		}
	}
	return k
}

func alive(ms []api.Member) int {
	k := 0
	for _, m := range ms {
		if m.Status == api.StatusAlive {
			k++
		}
	}
	return k
}

// start launches s's node, joining every running node.
func (c *Cluster) start(s *slot, expect int) error {
	return c.startJoining(s, expect, true)
}

// startJoining launches s's node; with join, it is given every running
// node's gossip address, as --join.
func (c *Cluster) startJoining(s *slot, expect int, join bool) error {
	cfg := mesh.FastConfig()
	cfg.Name = s.name
	cfg.DataDir = s.dir
	cfg.BindAddr = "127.0.0.1"
	cfg.GossipPort = s.gossipPort
	cfg.Port = s.port
	cfg.BootstrapExpect = expect
	cfg.RaftVoters = c.opts.voters
	if c.opts.scaled {
		cfg = ScaledTimers(cfg, c.opts.size)
		cfg.Gossip = ScaledGossip(cfg.Gossip, c.opts.size)
	}
	if join {
		cfg.Join = joinAddrs(c.running(), c.opts.joinAll)
	}
	if c.opts.logs {
		cfg.Logger = slog.New(slog.NewTextHandler(c.opts.logOut, &slog.HandlerOptions{Level: c.opts.logLevel}))
	}
	idx := s.index
	for _, f := range c.opts.configure {
		f(idx, &cfg)
	}
	fresh := s.gossipPort == 0
	var node *mesh.Node
	// A first start picks free ports; another process may take one between
	// the pick and the bind, so retry with new ports. A restart keeps its
	// ports (peers know them) and does not retry.
	for attempt := 0; ; attempt++ {
		if fresh {
			p, err := freeTCPPort()
			if err != nil {
				return err
			}
			cfg.GossipPort, cfg.Port = p, 0
		}
		ctx, cancel := context.WithTimeout(c.opts.ctx, 10*time.Second)
		var err error
		// Every goroutine the node starts (Raft, gossip, QUIC, its tasks)
		// inherits the label, and those goroutines' children too: a CPU
		// profile of the process splits by node (the scale benchmark's
		// leader CPU; `go tool pprof -tagfocus node=node-03`).
		pprof.Do(ctx, pprof.Labels("node", s.name), func(ctx context.Context) {
			node, err = mesh.Start(ctx, cfg)
		})
		cancel()
		if err == nil {
			break
		}
		if !fresh || attempt == 4 || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
	}
	s.node = node
	_, gp, _ := net.SplitHostPort(node.GossipAddr())
	s.gossipPort, _ = strconv.Atoi(gp)
	_, qp, _ := net.SplitHostPort(node.Addr())
	s.port, _ = strconv.Atoi(qp)
	for _, f := range c.opts.started {
		f(idx, node)
	}
	return nil
}

// maxJoin bounds the addresses a starting node joins: memberlist pushes
// and pulls the full member list with each, so joining every running node
// makes forming n nodes cost n²/2 state exchanges of up to n members each
// (one node start took seconds past 50 nodes). The first nodes (the
// bootstrap voters) and the latest ones are enough: gossip spreads the
// newcomer from there.
const maxJoin = 6

// joinAddrs are the gossip addresses a node starting next to running
// joins: all of them up to maxJoin, else the first and the latest
// maxJoin/2.
func joinAddrs(running []*slot, all bool) []string {
	pick := running
	if len(running) > maxJoin && !all {
		pick = append(slices.Clone(running[:maxJoin/2]), running[len(running)-maxJoin/2:]...)
	}
	var out []string
	for _, s := range pick {
		out = append(out, s.node.GossipAddr())
	}
	return out
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) running() []*slot {
	var out []*slot
	for _, s := range c.slots {
		if s.node != nil {
			out = append(out, s)
		}
	}
	return out
}

// N is the number of nodes, running or not.
func (c *Cluster) N() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots)
}

// Node returns node i, or nil while it is down.
func (c *Cluster) Node(i int) *mesh.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots[i].node
}

// Name returns node i's name (stable across restarts).
func (c *Cluster) Name(i int) string { return c.slots[i].name }

// DataDir returns node i's data dir (stable across restarts).
func (c *Cluster) DataDir(i int) string { return c.slots[i].dir }

// Index returns the index of the node with the given name, or -1.
func (c *Cluster) Index(name string) int {
	for _, s := range c.slots {
		if s.name == name {
			return s.index
		}
	}
	return -1
}

// Running lists the indexes of the nodes that are up.
func (c *Cluster) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, s := range c.running() {
		out = append(out, s.index)
	}
	return out
}

// Kill stops node i abruptly: no leave, no leadership transfer.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.slots[i].node
	c.slots[i].node = nil
	c.mu.Unlock()
	if n != nil {
		n.Kill()
	}
}

// Stop stops node i gracefully (leaves gossip, hands off leadership).
func (c *Cluster) Stop(i int) error {
	c.mu.Lock()
	n := c.slots[i].node
	c.slots[i].node = nil
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	return n.Close()
}

// Restart starts node i again with its data dir and ports, joining the
// running nodes. It does not wait for anything: use WaitFor.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[i]
	if s.node != nil {
		return fmt.Errorf("localcluster: %s is running", s.name)
	}
	return c.start(s, 0)
}

// RestartNoJoin starts node i again with its data dir and ports but no
// join addresses, as a node restarted by hand with a command line that has
// no --join; bootstrapExpect is that command line's --bootstrap-expect. It
// does not wait for anything: use WaitFor.
func (c *Cluster) RestartNoJoin(i, bootstrapExpect int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[i]
	if s.node != nil {
		return fmt.Errorf("localcluster: %s is running", s.name)
	}
	return c.startJoining(s, bootstrapExpect, false)
}

// Add starts one more node that joins the cluster (it does not bootstrap)
// and returns its index.
func (c *Cluster) Add() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.slots)
	s := c.newSlot(i)
	c.slots = append(c.slots, s)
	return i, c.start(s, 0)
}

// Leader returns the running node that is Raft leader, if exactly one
// running node believes it leads (-1, nil otherwise).
func (c *Cluster) Leader() (int, *mesh.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx, leader := -1, (*mesh.Node)(nil)
	for _, s := range c.running() {
		if s.node.Raft().IsLeader() {
			if leader != nil {
				return -1, nil
			}
			idx, leader = s.index, s.node
		}
	}
	return idx, leader
}

// Wait polls cond until it holds or timeout passes (or the context of
// WithContext is done); then it returns an error naming what was awaited.
func (c *Cluster) Wait(timeout time.Duration, what string, cond func() bool) error {
	if !PollContext(c.opts.ctx, timeout, cond) {
		if err := c.opts.ctx.Err(); err != nil {
			return fmt.Errorf("localcluster: stopped waiting for %s: %w", what, err)
		}
		return fmt.Errorf("localcluster: timed out after %s waiting for %s", timeout, what)
	}
	return nil
}

// Poll evaluates cond every few milliseconds until it returns true (true)
// or timeout passes (false).
func Poll(timeout time.Duration, cond func() bool) bool {
	return PollContext(context.Background(), timeout, cond)
}

// PollContext is Poll that also gives up (false) once ctx is done.
func PollContext(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// Close stops every running node abruptly (tests and the demo end fast) and
// waits.
func (c *Cluster) Close() {
	c.mu.Lock()
	var nodes []*mesh.Node
	for _, s := range c.running() {
		nodes = append(nodes, s.node)
		s.node = nil
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Kill()
		}()
	}
	wg.Wait()
}
