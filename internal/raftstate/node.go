package raftstate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Server is a Raft server: ID is the node name, Addr its QUIC address
// (host:port).
type Server struct {
	ID   string
	Addr string
}

// ConfigServer is a server of a Raft configuration with its suffrage.
type ConfigServer struct {
	ID, Addr string
	// Suffrage is SuffrageVoter, SuffrageNonvoter or SuffrageStaging.
	Suffrage string
}

// Suffrage values of ConfigServer.
const (
	SuffrageVoter    = "voter"
	SuffrageNonvoter = "nonvoter"
	SuffrageStaging  = "staging"
)

// Roles reported by Status.Role.
const (
	RoleLeader   = "leader"
	RoleVoter    = "voter"
	RoleNonvoter = "nonvoter"
	RoleNone     = "none"
)

// Status is a snapshot of a node's Raft view, for status pages and gossip
// metadata.
type Status struct {
	// ID is this node's id; Leader and LeaderAddr the leader's ("" when
	// unknown).
	ID, Leader, LeaderAddr string
	// State is Leader, Follower, Candidate or Shutdown.
	State string
	// Term is the current term; the indexes are this node's view.
	Term, CommitIndex, AppliedIndex, LastLogIndex uint64
	// Voters are the voters of the latest configuration, sorted by ID.
	Voters []Server
	// Role is this node's role from the latest configuration: leader,
	// voter, nonvoter (also staging) or none.
	Role string
}

// Result is the outcome of a committed command.
type Result struct {
	// Index is the log index the command was committed at.
	Index uint64
	// Value is what the command's handler returned (DeleteKV: whether the
	// key existed; PutKV: nil). Each New* constructor documents its
	// command's result type, e.g. splits.Lease for LeaseSplits.
	Value any
}

var (
	// ErrNotLeader: the call needs the leader and this node is not it.
	// Errors from raft's own raft.ErrNotLeader match it too (errors.Is).
	ErrNotLeader = errors.New("raftstate: not the leader")
	// ErrRejected: the command was committed but the FSM refused it (the
	// cause, e.g. ErrUnknownType, is wrapped as well). Nothing changed.
	ErrRejected = errors.New("raftstate: command rejected by the state machine")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("raftstate: node closed")
	// ErrDataDirInUse: another process (a running node) holds the data
	// dir's Raft log.
	ErrDataDirInUse = errors.New("raftstate: data dir in use by a running node")
)

// Node is one Raft server: raft, its stores in the data dir, the FSM.
type Node struct {
	cfg      Config
	log      hclog.Logger
	raft     *raft.Raft
	fsm      *fsm
	store    *raftboltdb.BoltStore
	trans    *raft.NetworkTransport
	layer    *trackedLayer
	hasState bool

	// applied and applyNanos count the commands Apply committed on this
	// node (as leader) and the time from the call to the FSM's answer.
	applied, applyNanos atomic.Int64

	waiters sync.WaitGroup // goroutines waiting on raft futures for a ctx
	// waitMu orders waiters.Add (in wait) before waiters.Wait (in
	// cleanup): once waitClosed is set no goroutine is added, so an Apply
	// racing with Close cannot Add while Close Waits.
	waitMu     sync.Mutex
	waitClosed bool
	done       chan struct{} // closed by Close
	once       sync.Once
	closeErr   error
}

// Open opens (or creates) the stores in cfg.DataDir and starts raft on
// layer. It never bootstraps by itself: see HasState and Bootstrap. The node
// owns layer from this call on: Close, or a failed Open, closes it.
func Open(cfg Config, layer raft.StreamLayer) (_ *Node, err error) {
	tl := newTrackedLayer(layer)
	n := &Node{cfg: cfg, log: newHclog(cfg.Logger), fsm: newNodeFSM(cfg.BeforeApply), layer: tl, done: make(chan struct{})}
	defer func() {
		if err != nil {
			n.cleanup()
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("raft data dir: %w", err)
	}
	st, err := openStores(cfg, n.log)
	if err != nil {
		return nil, err
	}
	n.store, n.hasState = st.log, st.hasState
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  tl,
		MaxPool: cfg.MaxPool,
		// No pipelined replication: with the default of 2 in flight,
		// hashicorp/raft's pipeline can park its sender on inprogressCh while
		// its decoder parks on doneCh after a rejected AppendEntries; the
		// follower then gets heartbeats but no entries, and Raft.Shutdown
		// never returns (seen once in ~20 teardowns of 8-node clusters in
		// bench fanin; grafana/pyroscope#5518 describes the same deadlock).
		// raft's own docs find pipelining of little benefit.
		MaxRPCsInFlight: 1,
		Timeout:         cfg.TransportTimeout,
		Logger:          n.log.Named("transport"),
	})
	n.raft, err = raft.NewRaft(raftConfig(n.cfg, n.log), n.fsm, n.store, n.store, st.snaps, n.trans)
	if err != nil {
		return nil, fmt.Errorf("start raft %s: %w", cfg.ID, err)
	}
	return n, nil
}

// stores are a server's Raft storage in its data dir: raft-boltdb as log
// and stable store, and the file snapshot store. Open and Recover use them.
type stores struct {
	snaps    *raft.FileSnapshotStore
	log      *raftboltdb.BoltStore
	hasState bool
}

// openStores opens the stores in cfg.DataDir. A data dir that a running
// node holds fails with ErrDataDirInUse after a second (bolt's file lock)
// instead of hanging. On success the caller closes st.log.
func openStores(cfg Config, log hclog.Logger) (st stores, err error) {
	st.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, log.Named("snapshots"))
	if err != nil {
		return stores{}, fmt.Errorf("raft snapshot store in %s: %w", cfg.DataDir, err)
	}
	dbPath := filepath.Join(cfg.DataDir, "raft.db")
	st.log, err = raftboltdb.New(raftboltdb.Options{Path: dbPath, BoltOptions: &bbolt.Options{Timeout: time.Second}})
	if errors.Is(err, bbolt.ErrTimeout) {
		return stores{}, fmt.Errorf("open raft log %s: %w (stop that node first): %w", dbPath, ErrDataDirInUse, err)
	}
	if err != nil {
		return stores{}, fmt.Errorf("open raft log %s: %w", dbPath, err)
	}
	st.hasState, err = raft.HasExistingState(st.log, st.log, st.snaps)
	if err != nil {
		st.log.Close()
		return stores{}, fmt.Errorf("read raft state in %s: %w", cfg.DataDir, err)
	}
	return st, nil
}

// raftConfig is hashicorp/raft's config for cfg.
func raftConfig(cfg Config, log hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = log
	// A removed server keeps running as a follower outside the
	// configuration (Status.Role "none"), so the leader can add it back
	// without a restart; the mesh decides what a "none" node does.
	rc.ShutdownOnRemove = false
	return rc
}

// HasState reports whether the data dir already held Raft state when the
// node opened (a restart): the caller must not bootstrap.
func (n *Node) HasState() bool { return n.hasState }

// Bootstrap starts a new cluster whose voters are exactly voters (sorted
// by ID; self must be among them). Every member of a formation calls it
// with the identical list. If the node already has state, raft's
// raft.ErrCantBootstrap is returned as is. Note that in a formation a late
// member can get that error legitimately: its peers bootstrapped first,
// elected a leader, and replicated the same configuration to it before its
// own Bootstrap ran. After a BootstrapPlan, treat ErrCantBootstrap as done.
func (n *Node) Bootstrap(voters []Server) error {
	if n.closed() {
		return ErrClosed
	}
	vs := slices.Clone(voters)
	slices.SortFunc(vs, func(a, b Server) int { return strings.Compare(a.ID, b.ID) })
	if !slices.ContainsFunc(vs, func(s Server) bool { return s.ID == n.cfg.ID }) {
		return fmt.Errorf("bootstrap %s: not among the voters %v", n.cfg.ID, vs)
	}
	var c raft.Configuration
	for _, s := range vs {
		if s.ID == "" || s.Addr == "" {
			return fmt.Errorf("bootstrap %s: voter %+v lacks an id or address", n.cfg.ID, s)
		}
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Addr)})
	}
	err := n.raft.BootstrapCluster(c).Error()
	if err == nil || errors.Is(err, raft.ErrCantBootstrap) {
		return err
	}
	return fmt.Errorf("bootstrap %s with %v: %w", n.cfg.ID, vs, err)
}

// Apply commits cmd through Raft and applies it to the FSM. Only the leader
// may: elsewhere it returns ErrNotLeader. If cmd.At is zero it is set to the
// current time here, before the command enters the log. ctx bounds the whole
// call; when it ends first, the command may still commit.
//
// Errors: ErrNotLeader (also wrapping raft.ErrNotLeader when leadership moved
// during the call), raft.ErrLeadershipLost (outcome unknown), ErrRejected
// (committed, FSM refused: Result.Index is set), ErrCommandTooLarge,
// ctx.Err(), ErrClosed.
func (n *Node) Apply(ctx context.Context, cmd Command) (Result, error) {
	if err := n.precheck(); err != nil {
		return Result{}, err
	}
	if cmd.At == 0 {
		cmd.At = time.Now().UnixNano()
	}
	data, err := EncodeCommand(cmd)
	if err != nil {
		return Result{}, err
	}
	if len(data) > n.cfg.MaxCommandBytes {
		return Result{}, fmt.Errorf("apply %v: %w: %d bytes, MaxCommandBytes %d", cmd.Type, ErrCommandTooLarge, len(data), n.cfg.MaxCommandBytes)
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("apply %v: %w", cmd.Type, err)
	}
	start := time.Now()
	f := n.raft.Apply(data, timeout)
	if err := n.wait(ctx, f); err != nil {
		return Result{}, fmt.Errorf("apply %v: %w", cmd.Type, n.mapErr(err))
	}
	n.applyNanos.Add(int64(time.Since(start)))
	n.applied.Add(1)
	res := Result{Index: f.Index()}
	r, ok := f.Response().(applyResult)
	if !ok {
		return res, fmt.Errorf("apply %v: unexpected FSM response %T", cmd.Type, f.Response())
	}
	res.Value = r.value
	if r.err != nil {
		return res, fmt.Errorf("apply %v at index %d: %w: %w", cmd.Type, res.Index, ErrRejected, r.err)
	}
	return res, nil
}

// ApplyLatency returns how many commands Apply has committed through this
// node (as leader) since it opened, and their summed latency from the call
// to the state machine's answer (commit on a quorum, then apply).
func (n *Node) ApplyLatency() (count int64, total time.Duration) {
	return n.applied.Load(), time.Duration(n.applyNanos.Load())
}

// Barrier waits, on the leader, until every entry committed before it has
// been applied to the local FSM: a Get after it is linearizable.
func (n *Node) Barrier(ctx context.Context) error {
	if err := n.precheck(); err != nil {
		return err
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if err := n.wait(ctx, n.raft.Barrier(timeout)); err != nil {
		return fmt.Errorf("barrier: %w", n.mapErr(err))
	}
	return nil
}

// Get reads key from the local FSM (possibly stale on a follower; use
// Barrier on the leader first for a linearizable read). The value is a copy.
func (n *Node) Get(key string) (value []byte, ok bool) { return n.fsm.get(key) }

// Job returns a deep copy of the named job from the local FSM, with its
// DYNAMIC progress (possibly stale on a follower, like Get).
func (n *Node) Job(name string) (JobView, bool) { return n.fsm.job(name) }

// JobCut is the offload boundary of the job of that name and id (id 0:
// any) in the local FSM: 0 when it has none, or is gone. A job cut while
// it runs (OffloadBody.Cut) shows here on every node as soon as the
// command is applied, before any lease says so.
func (n *Node) JobCut(name string, id uint64) int { return n.fsm.jobCut(name, id) }

// Jobs returns deep copies of every job in the local FSM, sorted by name,
// all read at one consistent point.
func (n *Node) Jobs() []JobView { return n.fsm.jobs() }

// Dataset returns a copy of the registered dataset with that fingerprint
// from the local FSM.
func (n *Node) Dataset(fingerprint string) (Dataset, bool) { return n.fsm.dataset(fingerprint) }

// AppliedCommands counts the commands this node's state machine has
// applied since it started, by type name (CommandType.String; "other" for
// a type beyond the known ones or an entry that did not decode). Every
// node applies every committed command, so any node's counts give the
// cluster's command rate (benchmarks).
func (n *Node) AppliedCommands() map[string]uint64 { return n.fsm.appliedCommands() }

// IsLeader reports whether this node is the leader right now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's id and address, "" when unknown.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderCh reports leadership changes of this node: true on becoming leader,
// false on losing it. It holds one value and a newer one replaces an unread
// older one, so a slow reader sees the latest state, not every flap. It is
// never closed; stop reading when the node is closed.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// Raft is an escape hatch for tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Configuration returns the latest configuration (possibly not yet
// committed), sorted by ID.
func (n *Node) Configuration() ([]ConfigServer, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	out := make([]ConfigServer, 0, len(f.Configuration().Servers))
	for _, s := range f.Configuration().Servers {
		out = append(out, ConfigServer{ID: string(s.ID), Addr: string(s.Address), Suffrage: suffrage(s.Suffrage)})
	}
	slices.SortFunc(out, func(a, b ConfigServer) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return SuffrageVoter
	case raft.Nonvoter:
		return SuffrageNonvoter
	default:
		return SuffrageStaging
	}
}

// Status returns this node's view of Raft.
func (n *Node) Status() Status {
	st := Status{
		ID:           n.cfg.ID,
		State:        n.raft.State().String(),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastLogIndex: n.raft.LastIndex(),
		Role:         RoleNone,
	}
	st.Leader, st.LeaderAddr = n.Leader()
	cfg, err := n.Configuration()
	if err != nil {
		return st
	}
	for _, s := range cfg {
		if s.Suffrage == SuffrageVoter {
			st.Voters = append(st.Voters, Server{ID: s.ID, Addr: s.Addr})
		}
		if s.ID == n.cfg.ID {
			st.Role = RoleNonvoter
			if s.Suffrage == SuffrageVoter {
				st.Role = RoleVoter
			}
		}
	}
	if st.Role == RoleVoter && st.State == raft.Leader.String() {
		st.Role = RoleLeader
	}
	return st
}

// AddVoter adds s as a voter (or promotes it), on the leader only. Raft
// first catches it up, then commits the new configuration.
func (n *Node) AddVoter(ctx context.Context, s Server) error {
	if err := n.precheck(); err != nil {
		return err
	}
	if s.ID == "" || s.Addr == "" {
		return fmt.Errorf("add voter %+v: id and address are required", s)
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("add voter %s: %w", s.ID, err)
	}
	f := n.raft.AddVoter(raft.ServerID(s.ID), raft.ServerAddress(s.Addr), 0, timeout)
	if err := n.wait(ctx, f); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", s.ID, s.Addr, n.mapErr(err))
	}
	return nil
}

// RemoveServer removes id from the configuration, on the leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if err := n.precheck(); err != nil {
		return err
	}
	timeout, err := timeoutOf(ctx)
	if err != nil {
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	if err := n.wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, timeout)); err != nil {
		return fmt.Errorf("remove server %s: %w", id, n.mapErr(err))
	}
	return nil
}

// Close shuts raft down (no leadership transfer: it doubles as a kill),
// closes the transport, its connections and the stores, and returns when
// all of it is done. It is idempotent.
func (n *Node) Close() error {
	n.once.Do(func() {
		close(n.done)
		n.closeErr = n.cleanup()
	})
	return n.closeErr
}

// cleanup releases whatever Open got as far as creating.
func (n *Node) cleanup() error {
	var errs []error
	setClosing(n.log)
	if n.raft != nil {
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
	}
	if n.trans != nil {
		_ = n.trans.Close()
	} else {
		_ = n.layer.Close()
	}
	if !n.layer.shutdown(n.cfg.TransportTimeout) {
		errs = append(errs, errors.New("raft transport: inbound connection handlers did not stop in time"))
	}
	n.waitMu.Lock()
	n.waitClosed = true
	n.waitMu.Unlock()
	// Futures resolve once raft has shut down, except an Apply's that was
	// still queued for the leader loop when raft stopped: hashicorp/raft
	// leaves it unanswered (its logFuture has no ShutdownCh), and its
	// waiter with it. Wait a bounded time, then say so rather than hang.
	waited := make(chan struct{})
	go func() {
		n.waiters.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(n.cfg.TransportTimeout):
		errs = append(errs, fmt.Errorf("raft: a command's future was left unanswered by raft's shutdown after %v (its waiter is abandoned)", n.cfg.TransportTimeout))
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft log: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) closed() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

func (n *Node) precheck() error {
	if n.closed() {
		return ErrClosed
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	return nil
}

// timeoutOf turns ctx's deadline into raft's enqueue timeout (0: none).
func timeoutOf(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	return d, nil
}

// wait waits for f or ctx. raft's timeout only bounds enqueueing, not the
// commit, so a ctx that can end gets a waiter goroutine; it ends when the
// future resolves, which raft guarantees by shutdown at the latest, and
// Close waits for it.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	ch := make(chan error, 1)
	n.waitMu.Lock()
	if n.waitClosed {
		n.waitMu.Unlock()
		return fmt.Errorf("%w: the node is closing", ErrClosed)
	}
	n.waiters.Add(1)
	n.waitMu.Unlock()
	go func() {
		defer n.waiters.Done()
		ch <- f.Error()
	}()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mapErr keeps raft's errors detectable and adds ours: raft.ErrNotLeader
// also matches ErrNotLeader, an enqueue timeout also matches
// context.DeadlineExceeded, and a shutdown matches ErrClosed.
func (n *Node) mapErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// PrepareClose tells the node that its owner is about to tear down what it
// stands on (the transport) before calling Close, so the errors Raft logs
// about vanished connections from then on are logged at debug level.
func (n *Node) PrepareClose() { setClosing(n.log) }
