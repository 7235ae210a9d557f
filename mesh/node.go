package mesh

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quic-go/quic-go"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/internal/worker"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/transport"
)

// ErrGossipKeyMismatch is returned by Start when joining fails because this
// node's gossip key does not match the cluster's.
var ErrGossipKeyMismatch = errors.New("gossip key mismatch")

// Node is one running feedmesh node.
type Node struct {
	leaving atomic.Bool // shutting down: reconnectLoop stops rejoining

	cfg        Config
	log        *slog.Logger
	logs       *nodeLogs   // rate-limits log's WARN/ERROR lines per cause (logging.go)
	quota      quotaLedger // on the leader: quota reserved by requests in flight (quota.go)
	auditLim   *auditLimit // refused requests' audit lines, per principal (audit.go)
	caps       capCache    // on a worker: capabilities the leader confirmed (capability.go)
	levels     levelMemory // the protocol levels Raft servers advertised (protocol.go)
	name       string
	addr       string // advertised QUIC address
	gossipAddr string // advertised gossip address
	// incarnation grows with each start of this node (its start time): a
	// lease tells the leader which process of the worker asks, so that a
	// quick restart does not leave the old process's leases held for good
	// (fsm.NewLeaseSplitsAs).
	incarnation uint64

	resetKey quic.StatelessResetKey
	mtls     *mutualTLS // nil in dev mode (tls.go)

	pc    net.PacketConn
	tr    *transport.Transport
	codec *transport.Codec
	rpc   *transport.RPCServer
	// gossipCount counts what memberlist sends (gossipcount.go).
	gossipCount gossipCounters
	raft        *raftnode.Node

	// access is the node's data-access policy: every spec it lists or
	// runs is bound to it (pipeline.Spec.Bind).
	access *objstore.Access

	worker *worker.Worker
	cache  *nodeCache // autocache.go
	// probes holds a slot per link probe being answered (offload.go):
	// each holds its payload's encoding until the caller reads it.
	probes chan struct{}

	ml       *memberlist.Memberlist
	delegate *delegate
	admit    *admission // admission.go
	members  *memberTable

	// known keeps the members this node knows in its data dir;
	// knownAtStart is what it held at start, and knewOthers whether there
	// was such a file at all (then the node was part of a cluster and never
	// bootstraps alone).
	known        *knownMembers
	knownAtStart []knownMember
	knewOthers   bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start starts a node: QUIC transport, Raft, gossip, and the background
// loops that form the cluster and keep its voter set. It returns once the
// node has joined the addresses in cfg.Join (or failed to). ctx bounds
// only the start itself.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = discardLogger()
	}
	var mtls *mutualTLS // nil in dev mode
	name := cfg.Name
	if cfg.TLSCA != "" {
		var err error
		if mtls, err = loadMutualTLS(&cfg); err != nil {
			return nil, err
		}
		name = mtls.self.Name
	}
	id, err := loadIdentity(cfg.DataDir, name)
	if err != nil {
		if mtls != nil && cfg.Name == "" {
			err = fmt.Errorf("%w (the name is the one in its certificate %s)", err, cfg.TLSCert)
		}
		return nil, err
	}
	n := &Node{cfg: cfg, name: id.name, mtls: mtls, resetKey: id.resetKey, incarnation: uint64(time.Now().UnixNano()), probes: make(chan struct{}, maxProbes)}
	log, n.logs = newNodeLogs(log, n.leaving.Load)
	n.auditLim = newAuditLimit()
	n.log = log.With("node", id.name)
	// Before Raft opens: its stream layer asks the member table who may
	// speak Raft (raftpeers.go).
	n.members = newMemberTable(n.log, cfg.DeadMemberRetention, cfg.Gossip.ReconnectTimeout)
	if addr, exposed := cfg.exposed(); exposed && cfg.Insecure && (mtls == nil || cfg.GossipKey == nil) {
		n.log.Warn("insecure: the node is reachable from the network without mutual TLS or without a gossip key; whoever reaches its ports can join the cluster and read its data",
			"addr", addr, "mutual_tls", mtls != nil, "gossip_key", cfg.GossipKey != nil)
	}
	if n.access, err = cfg.dataAccess(n.log.With("component", "data-access")); err != nil {
		return nil, err
	}
	n.log.Info("data access", "policy", n.access.String())
	n.known, n.knownAtStart, n.knewOthers = newKnownMembers(cfg.DataDir, cfg.KnownMembersMax, n.log)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(1)
	go n.logSummaryLoop()
	if err := n.start(ctx); err != nil {
		n.shutdown(false)
		return nil, err
	}
	n.log.Info("node started", "addr", n.addr, "gossip", n.GossipAddr(), "raft_state", n.raft.HasState())
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	cfg := n.cfg

	serverTLS, clientTLS, err := n.tlsConfigs()
	if err != nil {
		return err
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(cfg.BindAddr), Port: cfg.Port})
	if err != nil {
		return fmt.Errorf("listen on UDP %s:%d for QUIC: %w", cfg.BindAddr, cfg.Port, err)
	}
	n.pc = udp
	if cfg.WrapPacketConn != nil {
		n.pc = cfg.WrapPacketConn(udp)
	}
	quicPort := udp.LocalAddr().(*net.UDPAddr).Port
	n.addr = net.JoinHostPort(cfg.advertiseIP(), strconv.Itoa(quicPort))

	tcfg := cfg.Transport
	tcfg.StatelessResetKey = &n.resetKey
	if n.tr, err = transport.New(n.pc, serverTLS, clientTLS, tcfg, n.log.With("component", "transport")); err != nil {
		return fmt.Errorf("start QUIC transport: %w", err)
	}
	if n.codec, err = transport.NewCodec(tcfg.MaxHeaderBytes, tcfg.MaxFrameBytes); err != nil {
		return err
	}

	rcfg := cfg.Raft
	rcfg.ID, rcfg.Addr, rcfg.DataDir = n.name, n.addr, filepath.Join(cfg.DataDir, raftDir)
	// A voter started again at a new address (a pod's new IP) is dialled
	// where gossip says it is, not where the configuration recorded it.
	rcfg.AddressOf = func(id string) (string, bool) {
		if id == n.name {
			return n.addr, true
		}
		return n.members.addrOf(id)
	}
	if rcfg.Logger == nil {
		rcfg.Logger = n.log // raftnode adds component=raft
	}
	adv, err := net.ResolveUDPAddr("udp", n.addr)
	if err != nil {
		return fmt.Errorf("advertise address %s: %w", n.addr, err)
	}
	if n.raft, err = raftnode.Open(rcfg, raftnode.StreamLayer(n.tr, adv, n.raftPeer)); err != nil {
		return fmt.Errorf("open raft: %w", err)
	}

	n.rpc = transport.NewRPCServer(n.codec, tcfg.MaxConcurrentRPCs, n.log.With("component", "rpc"))
	n.registerHandlers()
	n.worker = n.newWorker()
	if err := n.openCache(); err != nil {
		return err
	}
	n.worker.Serve(n.tr.Listener(transport.KindData))
	ctl := n.tr.Listener(transport.KindControl)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.rpc.Serve(ctl); err != nil && n.ctx.Err() == nil {
			n.log.Error("control server stopped", "err", err)
		}
	}()

	if err := n.startGossip(ctx); err != nil {
		return err
	}

	n.wg.Add(5)
	go n.formationLoop()
	go n.voterLoop()
	go n.roleLoop()
	go n.jobLoop()
	go n.reconnectLoop()
	if n.cfg.KnownMembersMax > 0 {
		n.wg.Add(1)
		go n.knownMembersLoop(n.members.watch())
	}
	return nil
}

func (n *Node) tlsConfigs() (server, client *tls.Config, err error) {
	if n.mtls != nil {
		return n.mtls.server, n.mtls.client, nil
	}
	server, client, err = transport.DevTLS(filepath.Join(n.cfg.DataDir, "tls"), n.name)
	if err != nil {
		return nil, nil, fmt.Errorf("dev TLS certificate: %w", err)
	}
	return server, client, nil
}

// Name is the node's name (its id in gossip and Raft).
func (n *Node) Name() string { return n.name }

// Addr is the node's advertised QUIC address: clients and the CLI dial it.
func (n *Node) Addr() string { return n.addr }

// GossipAddr is the node's gossip address, for other nodes' --join.
func (n *Node) GossipAddr() string { return n.gossipAddr }

// Transport exposes the node's QUIC transport to the layers built on it.
func (n *Node) Transport() *transport.Transport { return n.tr }

// Raft exposes the node's replicated state.
func (n *Node) Raft() *raftnode.Node { return n.raft }

// Members lists every member this node knows of, dead ones included. A
// node that holds the Raft configuration states every member's role from
// it; others rely on what each member advertises through gossip.
func (n *Node) Members() []api.Member {
	ms := n.members.snapshot()
	cfg, err := n.raft.Configuration()
	if err != nil || len(cfg) == 0 {
		return ms
	}
	leader, _ := n.raft.Leader()
	roles := make(map[string]string, len(cfg))
	for _, s := range cfg {
		if s.Suffrage == plan.SuffrageVoter {
			roles[s.ID] = "voter"
		} else {
			roles[s.ID] = "nonvoter"
		}
	}
	if leader != "" {
		roles[leader] = "leader"
	}
	for i := range ms {
		if r, ok := roles[ms[i].Name]; ok {
			ms[i].Raft = r
		} else {
			ms[i].Raft = "none"
		}
	}
	return ms
}

// Close leaves the cluster gracefully (a leader hands off leadership first)
// and stops everything the node started.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.shutdown(true) })
	return n.closeErr
}

// Kill stops the node abruptly, as a crash would: no leave message, no
// leadership transfer. Its data dir is left as a crash leaves it. Used by
// test clusters for fault injection.
func (n *Node) Kill() {
	n.closeOnce.Do(func() { n.closeErr = n.shutdown(false) })
}

func (n *Node) shutdown(graceful bool) error {
	n.leaving.Store(true) // no more rejoins (reconnectLoop)
	var errs []error
	t0 := time.Now()
	defer func() { n.log.Debug("shutdown took", "d", time.Since(t0)) }()
	mark := func(what string) { n.log.Debug("shutdown step", "step", what, "at", time.Since(t0)) }
	if graceful && n.worker != nil && n.cfg.DrainTimeout > 0 {
		// Before anything else: the node is still a full member while
		// its tasks hand back their splits and their consumers read
		// what is queued.
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DrainTimeout)
		if n.worker.Drain(ctx) {
			n.log.Info("drained", "took", time.Since(t0).Round(time.Millisecond))
		}
		cancel()
		mark("drained")
	}
	if n.known != nil {
		// Record the members as this node last sees them, before leaving
		// changes anything; a crash (Kill) writes nothing.
		var final []knownMember
		if graceful && n.members != nil {
			final = n.pickKnownMembers()
		}
		n.known.close(final)
	}
	if graceful && n.ml != nil {
		// Say we are leaving, so peers record "left" rather than "dead".
		role := "none"
		if n.raft != nil {
			role = n.raft.Status().Role
		}
		if err := n.setMetaLeaving(role); err == nil {
			n.ml.UpdateNode(n.leaveTimeout())
		}
	}
	mark("meta")
	if graceful && n.raft != nil && n.raft.IsLeader() {
		if err := n.raft.Raft().LeadershipTransfer().Error(); err != nil {
			n.log.Debug("leadership transfer on close", "err", err)
		}
	}
	if n.ml != nil {
		if graceful {
			if err := n.ml.Leave(n.leaveTimeout()); err != nil {
				n.log.Debug("leave", "err", err)
			}
		}
	}
	mark("left")
	n.cancel()
	if n.rpc != nil {
		errs = append(errs, n.rpc.Close())
	}
	if n.ml != nil {
		errs = append(errs, n.ml.Shutdown())
	}
	mark("gossip down")
	if n.raft != nil {
		n.raft.PrepareClose()
	}
	// The transport goes before Raft: closing it fails Raft's in-flight
	// dials to dead peers at once, which Raft's shutdown would otherwise
	// wait out (up to a handshake timeout).
	if n.tr != nil {
		errs = append(errs, n.tr.Close())
	}
	mark("transport down")
	if n.worker != nil {
		n.worker.Close()
	}
	if n.cache != nil {
		n.cache.wg.Wait() // cache streams end with the transport; decisions with n.ctx
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Close())
	}
	mark("raft down")
	n.wg.Wait()
	if n.access != nil {
		n.access.Close() // after the worker's tasks: nothing opens through it now
	}
	if n.pc != nil {
		n.pc.Close()
	}
	n.logs.flush(time.Now(), true) // the counts of lines left out since the last summary
	n.flushAudit(time.Now(), true)
	n.log.Info("node stopped", "graceful", graceful)
	return errors.Join(errs...)
}

func (n *Node) leaveTimeout() time.Duration {
	return 2 * n.cfg.Gossip.ProbeInterval
}
