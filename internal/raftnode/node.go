package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

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
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrRejected: the command was committed but the FSM refused it (the
	// cause, e.g. ErrUnknownType, is wrapped as well). Nothing changed.
	ErrRejected = errors.New("raftnode: command rejected by the state machine")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("raftnode: node closed")
	// ErrDataDirInUse: another process (a running node) holds the data
	// dir's Raft log.
	ErrDataDirInUse = errors.New("raftnode: data dir in use by a running node")
)

// Node is one Raft server: raft, its stores in the data dir, the FSM.
type Node struct {
	cfg      Config
	log      hclog.Logger
	raft     *raft.Raft
	machine  *machine
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
	n := &Node{cfg: cfg, log: newHclog(cfg.Logger), machine: newNodeMachine(cfg), layer: tl, done: make(chan struct{})}
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
	tcfg := &raft.NetworkTransportConfig{
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
	}
	if cfg.AddressOf != nil {
		tcfg.ServerAddressProvider = addressProvider(cfg.AddressOf)
	}
	n.trans = raft.NewNetworkTransportWithConfig(tcfg)
	n.raft, err = raft.NewRaft(raftConfig(n.cfg, n.log), n.machine, n.store, n.store, st.snaps, n.trans)
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
func (n *Node) Bootstrap(voters []plan.Server) error {
	if n.closed() {
		return ErrClosed
	}
	vs := slices.Clone(voters)
	slices.SortFunc(vs, func(a, b plan.Server) int { return strings.Compare(a.ID, b.ID) })
	if !slices.ContainsFunc(vs, func(s plan.Server) bool { return s.ID == n.cfg.ID }) {
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

// PrepareClose tells the node that its owner is about to tear down what it
// stands on (the transport) before calling Close, so the errors Raft logs
// about vanished connections from then on are logged at debug level.
func (n *Node) PrepareClose() { setClosing(n.log) }

// addressProvider answers raft's ServerAddressProvider from AddressOf.
type addressProvider func(id string) (string, bool)

func (f addressProvider) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := f(string(id)); ok && a != "" {
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("no current address for %s", id)
}
