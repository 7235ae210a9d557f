package mesh

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/feedmesh/feedmesh/internal/autocache"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/internal/worker"
	"github.com/feedmesh/feedmesh/pipeline/objstore"

	"github.com/hashicorp/memberlist"

	"github.com/feedmesh/feedmesh/internal/share"
	"github.com/feedmesh/feedmesh/internal/version"
	"github.com/feedmesh/feedmesh/transport"
)

// AutoVoters as Config.RaftVoters lets the leader pick the voter count
// from the cluster's size (plan.VoterTarget).
const AutoVoters = plan.AutoVoters

// Version is the build version a node advertises in its gossip metadata
// and `feedmesh version` prints: internal/version's, which the Python
// package's feedmesh.__version__ is too.
var Version = version.Version

// Config configures one node. DefaultConfig gives production settings;
// FastConfig gives the timing preset used by tests and the demo.
type Config struct {
	// Name identifies the node in gossip and Raft. Empty means: the name
	// stored in DataDir, or a new random one on first start. A name that
	// differs from the one stored in DataDir is an error.
	Name string
	// DataDir holds the node's identity, certificate and Raft state.
	DataDir string
	// BindAddr is the IP address both gossip and QUIC bind to.
	BindAddr string
	// AdvertiseAddr is the IP address other nodes use to reach this one;
	// empty means BindAddr (which then must not be unspecified).
	AdvertiseAddr string
	// GossipPort is the TCP+UDP port of memberlist; 0 picks a free one.
	GossipPort int
	// Port is the UDP port of QUIC (Raft, control and data); 0 picks one.
	Port int
	// Join lists gossip addresses (host:port) to join at start. Every
	// address is tried: joining one seed was seen to converge in 26-30 s,
	// joining all known addresses in ~20 ms. A host may be a DNS name: it
	// stands for every address it resolves to (a Kubernetes headless
	// Service), resolved again at each retry, so nodes that start in any
	// order find each other; without a port, the node's own gossip port.
	Join []string
	// Resolver resolves the DNS names in Join; nil: net.DefaultResolver
	// (/etc/hosts, then /etc/resolv.conf's servers). Tests give their own.
	Resolver *net.Resolver
	// RetryJoinInterval: when no Join address answers at start (nodes of a
	// new cluster start in any order), keep trying this often in the
	// background. 0 makes Start fail instead. A gossip key mismatch always
	// fails Start.
	RetryJoinInterval time.Duration
	// BootstrapExpect: once this many members are seen through gossip, the
	// BootstrapExpect members with the lowest names bootstrap Raft together.
	// 0 with no Join: bootstrap alone (single-node dev mode). 0 with Join:
	// never bootstrap; join an existing cluster.
	BootstrapExpect int
	// RaftVoters is the voter count the leader maintains. 0 (AutoVoters,
	// the default) adapts it to the cluster: 3 voters, 5 once at least 5
	// members are live, back to 3 only as voters dead past VoterGrace are
	// removed (plan.VoterTarget). 1, 3 or 5 fix it: 1 tolerates no
	// failure, 3 one, 5 two.
	RaftVoters int
	// VoterGrace is how long a voter must be dead before the leader
	// replaces it. Shorter reacts faster; longer rides out restarts.
	VoterGrace time.Duration
	// ReconcileInterval is how often the leader checks the voter set, and
	// how often a node refreshes the Raft role it advertises.
	ReconcileInterval time.Duration
	// DrainTimeout bounds the drain of a graceful Close (drain.go): the
	// node's DYNAMIC tasks hand back the splits they have not started,
	// read the one in progress, and let their consumers read what is
	// queued before the node leaves. 0 leaves at once, as a crash would
	// for the splits held (lost at-most-once, read again exactly-once).
	// Default 30 s; 10 s in the fast preset.
	DrainTimeout time.Duration
	// RequestTimeout bounds a control request that arrives without a
	// deadline of its own, including forwarding to the leader.
	RequestTimeout time.Duration
	// ForwardAttemptTimeout bounds one attempt to reach the leader, so a
	// request can retry against a new leader within its deadline.
	ForwardAttemptTimeout time.Duration
	// KnownMembersMax bounds how many members' gossip addresses the node
	// keeps in its data dir (known-members.json) to rejoin them when it
	// restarts, with or without Join; joining any one of them is enough, so
	// a few dozen serve any mesh. 0 keeps no file: a restarted node then
	// rejoins only through Join.
	KnownMembersMax int
	// KnownMembersInterval is the shortest time between two writes of the
	// known-members file; membership changes within it are written
	// together. The file is also written when the node stops gracefully.
	KnownMembersInterval time.Duration
	// DeadMemberRetention is how long a dead or departed member stays in
	// the member list before it is forgotten (a dead one at least
	// Gossip.ReconnectTimeout, while it is retried).
	DeadMemberRetention time.Duration

	// GossipKey enables gossip encryption (AES-GCM); 32 bytes, or nil.
	GossipKey []byte
	// TLSCA, TLSCert and TLSKey enable mutual TLS between nodes and
	// clients. All empty: dev mode, a self-signed certificate is generated
	// in DataDir and peers are not verified. TLSCert must be a node
	// certificate of the CA's cluster (`feedmesh tls cert create --node`)
	// naming this node: with Name empty, its name becomes the node's.
	TLSCA, TLSCert, TLSKey string
	// Insecure lets a node that binds to or advertises an address other
	// than loopback start without mutual TLS or without a gossip key
	// (--insecure): only on a trusted private network, where whoever
	// reaches the node's ports may join the cluster and read its data.
	// On loopback nothing is needed.
	Insecure bool

	// GossipKeyFile is the file GossipKey was read from (--gossip-key
	// FILE), if any: like DataDir and the TLS files, no spec may read it.
	GossipKeyFile string

	// DataRoots are the directories whose files the specs this node runs
	// may read (--data-root; docs/operating/security.md, "Data access"):
	// a spec's local path is relative to the first root or absolute under
	// one, and is opened through os.Root (no `..`, no symbolic link out of its root, no
	// /proc). A root may neither hold nor lie inside DataDir, the TLS
	// files, GossipKeyFile or an object store's credentials file: Start
	// refuses it. Empty: in loopback dev mode (the node binds and
	// advertises loopback addresses only, without mutual TLS) the current
	// directory, without those files where they lie under it; off
	// loopback or under mutual TLS, no local files.
	DataRoots []string
	// AllowHosts are the hosts http(s) sources and tokenizer URLs may
	// reach (--allow-host): a host name (its public addresses),
	// *.domain, * (any name), an IP address or a CIDR network.
	// Loopback, link-local and private addresses are reached only when
	// allowed by address or network; every redirect hop and every
	// address connected to is checked. Empty: none.
	AllowHosts []string
	// ObjectStores are the object stores s3:// paths may read
	// (--object-store NAME=endpoint=…): a spec names one
	// (s3://NAME/bucket/key, or object_store: {store: NAME}), never an
	// endpoint; the node alone knows where it is and its credentials.
	ObjectStores []objstore.NamedStore
	// Policy, if set, narrows what each tenant's requests may name
	// (--policy FILE; docs/operating/security.md, "Roles and grants"):
	// job names by prefix, the data roots, named stores and hosts its
	// jobs read. nil: no narrowing (tenants are kept apart all the same).
	// Give every node the same: any node may lead, every node runs
	// workers.
	Policy *Policy

	// Gossip holds memberlist's failure-detection timing.
	Gossip GossipConfig
	// Transport configures QUIC and the frame codec.
	Transport transport.Config
	// Raft configures Raft timing and storage; its ID, Addr and DataDir
	// are filled in by the node.
	Raft raftnode.Config
	// Worker bounds the node's work as a worker.
	Worker worker.Config
	// CacheBytes bounds the autocache on this node's disk (the files under
	// DataDir/cache; --cache-bytes): least recently used entries are
	// evicted beyond it. 0 turns caching off (autocache ops compute).
	// Default DefaultCacheBytes.
	CacheBytes int64
	// Autocache tunes the autocache decision (autocache.go).
	Autocache AutocacheConfig
	// Tenants bounds what each tenant may hold in the replicated state,
	// and when unread datasets are collected (quota.go). The leader's
	// apply.
	Tenants TenantsConfig

	// Logger receives the node's structured logs; nil discards them.
	Logger *slog.Logger

	// WrapPacketConn, when set, wraps the node's UDP socket before QUIC
	// uses it. Test clusters use it to drop packets between partitions.
	WrapPacketConn func(net.PacketConn) net.PacketConn
	// WrapGossipTransport, when set, wraps memberlist's network transport.
	WrapGossipTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
	// OnLeaderCatchUp, when set, is called when this node, as leader, does
	// not find a job in its state and waits for its state machine to apply
	// everything committed before it answers that the job does not exist.
	// Tests learn from it that a lookup waits there; nil in a real node.
	OnLeaderCatchUp func(job string)
}

// TenantsConfig bounds what each tenant holds in the replicated state
// (docs/operating/security.md, "Quotas and cleanup"). The leader checks
// them before it creates a job or registers a dataset for a principal
// that is not privileged (administrators and nodes are bound only by the
// state machine's own limits, fsm.MaxJobs and fsm.MaxDatasets); every node
// should have the same, as any may lead.
type TenantsConfig struct {
	// MaxJobs bounds a tenant's jobs (--tenant-max-jobs).
	MaxJobs int
	// MaxDatasets bounds the datasets a tenant registered
	// (--tenant-max-datasets).
	MaxDatasets int
	// MaxStateBytes bounds the bytes of a tenant's dataset specs, what it
	// adds to every Raft log and snapshot (--tenant-max-state-bytes).
	MaxStateBytes int64
	// MaxConsumers bounds the consumers attached to a tenant's jobs
	// together (--tenant-max-consumers).
	MaxConsumers int
	// MaxJobNodes, if > 0, bounds the nodes one of a tenant's jobs may
	// take (--tenant-max-job-nodes): a new job must ask for at most as
	// many workers (max_workers, or a fixed count; autoscaling stays
	// below it). 0: no bound.
	MaxJobNodes int
	// AdminReserve is how many of the state machine's job and dataset
	// slots only the privileged may take, so that tenants together can
	// never lock administrators out (--admin-reserve).
	AdminReserve int
	// DatasetGCAfter is how long a dataset no job reads is kept before
	// the leader removes it (--dataset-gc-after): a repeated job within
	// it finds it, and where its autoscaling converged. 0 keeps them.
	DatasetGCAfter time.Duration
}

// DefaultTenants are the tenant bounds of DefaultConfig: a tenant may take
// a quarter of the state machine's slots, 256 MiB of specs.
func DefaultTenants() TenantsConfig {
	return TenantsConfig{MaxJobs: 1024, MaxDatasets: 1024, MaxStateBytes: 256 << 20, MaxConsumers: 4096, AdminReserve: 256, DatasetGCAfter: 30 * time.Minute}
}

// GossipConfig is the subset of memberlist's timing that feedmesh tunes.
// A killed node is declared dead after about
// ProbeInterval + ProbeTimeout + SuspicionMult*ProbeInterval.
type GossipConfig struct {
	// ProbeInterval is how often a random member is probed.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspect has to refute before it is
	// declared dead (multiplied by ProbeInterval and log10 of the size).
	SuspicionMult int
	// SuspicionMaxTimeoutMult caps the suspicion timeout while few other
	// members have confirmed the suspicion.
	SuspicionMaxTimeoutMult int
	// GossipInterval is how often gossip messages are sent.
	GossipInterval time.Duration
	// PushPullInterval is how often full state is exchanged over TCP.
	PushPullInterval time.Duration
	// TCPTimeout bounds push/pull and TCP fallback probes.
	TCPTimeout time.Duration
	// GossipToTheDeadTime is how long dead members still receive gossip.
	GossipToTheDeadTime time.Duration
	// DeadNodeReclaimTime lets a dead node's name be reused from a new
	// address after this long.
	DeadNodeReclaimTime time.Duration
	// ReconnectInterval is how often the node tries to rejoin one member it
	// holds dead (not left), picked at random, as Serf's reconnect does:
	// after a partition that outlasts GossipToTheDeadTime both sides hold
	// each other dead and stop gossiping to each other, so without it they
	// would never merge again. 0 turns it off.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a dead member keeps being retried (and
	// listed, if longer than DeadMemberRetention).
	ReconnectTimeout time.Duration
}

// DefaultConfig returns production settings: a SIGKILLed node is declared
// dead in about 3 s (memberlist's LAN default takes ~5 s).
func DefaultConfig() Config {
	return Config{
		BindAddr:              "127.0.0.1",
		RaftVoters:            AutoVoters,
		VoterGrace:            10 * time.Second,
		ReconcileInterval:     time.Second,
		RequestTimeout:        10 * time.Second,
		DrainTimeout:          30 * time.Second,
		RetryJoinInterval:     time.Second,
		ForwardAttemptTimeout: 2 * time.Second,
		DeadMemberRetention:   time.Hour,
		KnownMembersMax:       32,
		KnownMembersInterval:  time.Second,
		Gossip: GossipConfig{
			ProbeInterval:           500 * time.Millisecond,
			ProbeTimeout:            250 * time.Millisecond,
			SuspicionMult:           4,
			SuspicionMaxTimeoutMult: 4,
			GossipInterval:          100 * time.Millisecond,
			PushPullInterval:        15 * time.Second,
			TCPTimeout:              2 * time.Second,
			GossipToTheDeadTime:     15 * time.Second,
			DeadNodeReclaimTime:     10 * time.Second,
			ReconnectInterval:       10 * time.Second,
			ReconnectTimeout:        24 * time.Hour,
		},
		Transport: nodeTransport(transport.DefaultConfig()),
		Raft:      raftnode.DefaultConfig(),
		Worker: worker.Config{
			TaskBuffer:         8,
			LeaseSplits:        256,
			LeaseDuration:      250 * time.Millisecond,
			OrphanPollInterval: 250 * time.Millisecond,
			MaxWindow:          64,
			SendCoalesce:       16,
			JobPollInterval:    2 * time.Second,
			ShareWindowBytes:   share.DefaultWindowBytes,
			RoundsAhead:        worker.DefaultRoundsAhead,
			RoundsHeld:         worker.DefaultRoundsHeld,
			TaskMemoryBudget:   worker.DefaultTaskMemoryBudget,
		},
		CacheBytes: DefaultCacheBytes,
		Tenants:    DefaultTenants(),
		Autocache: AutocacheConfig{ProfileElements: 300, ProbeBytes: autocache.DefaultProbeBytes,
			HeldTTL: 100 * time.Millisecond, FetchTimeout: time.Minute, MaxServing: 8},
	}
}

// nodeTransport is c with a node's receive windows. A node receives
// control requests, Raft and the odd cached split, not bulk batches
// (those go to clients, whose transport keeps the defaults), so its
// connections start at 64 KiB and may grow by 48 MiB together: with the
// default limits, what peers can make a node hold (1024 connections' own
// state, ~48 MiB; unread QUIC data, 1024 × 64 KiB + 48 MiB; control
// requests, 64 MiB + 256 × 128 KiB) stays within 256 MiB
// (transport.Config.PeerMemoryBound; docs/operating/limits.md).
func nodeTransport(c transport.Config) transport.Config {
	c.InitialReceiveWindow = 64 << 10
	c.MaxReceiveWindowBytes = 48 << 20
	return c
}

// FastConfig is the preset for in-process test clusters and the demo: a
// killed node is declared dead within ~1 s and a new leader is elected in
// a few hundred milliseconds.
func FastConfig() Config {
	c := DefaultConfig()
	c.VoterGrace = 500 * time.Millisecond
	c.ReconcileInterval = 100 * time.Millisecond
	c.RequestTimeout = 5 * time.Second
	c.DrainTimeout = 10 * time.Second
	c.RetryJoinInterval = 100 * time.Millisecond
	c.ForwardAttemptTimeout = 500 * time.Millisecond
	c.KnownMembersInterval = 100 * time.Millisecond
	c.Gossip = GossipConfig{
		ProbeInterval:           100 * time.Millisecond,
		ProbeTimeout:            50 * time.Millisecond,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          20 * time.Millisecond,
		PushPullInterval:        2 * time.Second,
		TCPTimeout:              500 * time.Millisecond,
		GossipToTheDeadTime:     2 * time.Second,
		DeadNodeReclaimTime:     time.Second,
		ReconnectInterval:       200 * time.Millisecond,
		ReconnectTimeout:        time.Minute,
	}
	c.Transport = nodeTransport(transport.FastConfig())
	c.Raft = raftnode.FastConfig()
	c.Worker.JobPollInterval = 200 * time.Millisecond
	c.Worker.OrphanPollInterval = 100 * time.Millisecond
	c.Worker.ShareWindowBytes = share.FastConfig().WindowBytes
	return c
}

// Validate checks the configuration; errors name the field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.DataDir == "" {
		bad("DataDir", "required")
	}
	if len(c.Name) > 128 {
		bad("Name", "at most 128 bytes (it travels in gossip metadata)")
	}
	if ip := net.ParseIP(c.BindAddr); ip == nil {
		bad("BindAddr", "%q is not an IP address", c.BindAddr)
	} else if ip.IsUnspecified() && c.AdvertiseAddr == "" {
		bad("AdvertiseAddr", "required when BindAddr is %s", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		bad("AdvertiseAddr", "%q is not an IP address", c.AdvertiseAddr)
	}
	if c.GossipPort < 0 || c.GossipPort > 65535 {
		bad("GossipPort", "%d out of range", c.GossipPort)
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("Port", "%d out of range", c.Port)
	}
	if c.DrainTimeout < 0 {
		bad("DrainTimeout", "%v: must be >= 0 (0: no drain)", c.DrainTimeout)
	}
	if c.BootstrapExpect < 0 {
		bad("BootstrapExpect", "must be >= 0")
	}
	if c.KnownMembersMax < 0 {
		bad("KnownMembersMax", "%d: must be >= 0 (0: keep no known-members file)", c.KnownMembersMax)
	}
	if c.KnownMembersMax > 0 && c.KnownMembersInterval <= 0 {
		bad("KnownMembersInterval", "must be > 0 when KnownMembersMax is")
	}
	if c.RaftVoters < 0 || c.RaftVoters > 7 {
		bad("RaftVoters", "%d: want 0 (auto: 3, or 5 from 5 members on), or 1, 3 or 5 (an odd number up to 7)", c.RaftVoters)
	}
	if c.GossipKey != nil && len(c.GossipKey) != 32 {
		bad("GossipKey", "must be 32 bytes, got %d", len(c.GossipKey))
	}
	tlsSet := 0
	for _, f := range []string{c.TLSCA, c.TLSCert, c.TLSKey} {
		if f != "" {
			tlsSet++
		}
	}
	if tlsSet != 0 && tlsSet != 3 {
		bad("TLSCA/TLSCert/TLSKey", "give all three or none")
	}
	if err := c.checkSecure(tlsSet == 3); err != nil {
		bad("BindAddr/AdvertiseAddr", "%v", err)
	}
	for name, d := range map[string]time.Duration{
		"VoterGrace": c.VoterGrace, "ReconcileInterval": c.ReconcileInterval,
		"RequestTimeout": c.RequestTimeout, "ForwardAttemptTimeout": c.ForwardAttemptTimeout,
		"Gossip.ProbeInterval": c.Gossip.ProbeInterval, "Gossip.ProbeTimeout": c.Gossip.ProbeTimeout,
		"Gossip.GossipInterval": c.Gossip.GossipInterval, "Gossip.TCPTimeout": c.Gossip.TCPTimeout,
	} {
		if d <= 0 {
			bad(name, "must be > 0")
		}
	}
	c.validateBounds(bad)
	if c.Gossip.SuspicionMult < 1 {
		bad("Gossip.SuspicionMult", "must be >= 1")
	}
	if err := c.Transport.Validate(); err != nil {
		bad("Transport", "%v", err)
	}
	for i, r := range c.DataRoots {
		if r == "" {
			bad(fmt.Sprintf("DataRoots[%d]", i), "empty")
		}
	}
	return errors.Join(errs...)
}

// validateBounds is Validate's part for the worker's, the autocache's and
// the tenants' bounds.
func (c *Config) validateBounds(bad func(field, format string, args ...any)) {
	if c.Worker.TaskBuffer < 1 || c.Worker.LeaseSplits < 1 || c.Worker.LeaseDuration <= 0 || c.Worker.OrphanPollInterval <= 0 || c.Worker.MaxWindow < 1 || c.Worker.SendCoalesce < 1 || c.Worker.JobPollInterval <= 0 {
		bad("Worker", "TaskBuffer, LeaseSplits, LeaseDuration, OrphanPollInterval, MaxWindow, SendCoalesce and JobPollInterval must be > 0")
	}
	if s := c.Worker.LeaseHoldShare; s != s || s > 1 {
		bad("Worker.LeaseHoldShare", "must be a share of a job's splits, at most 1 (0: the default, negative: no bound)")
	}
	if c.Worker.TaskMemoryBudget < 0 {
		bad("Worker.TaskMemoryBudget", "must be >= 0 (0: the default, 1 GiB)")
	}
	if c.Worker.RoundsAhead < 0 || c.Worker.RoundsHeld < 0 {
		bad("Worker.RoundsAhead/RoundsHeld", "must be >= 0 (0: the default)")
	}
	if c.Worker.ShareWindowBytes <= 0 {
		bad("Worker.ShareWindowBytes", "%d: must be > 0 (default %d)", c.Worker.ShareWindowBytes, int64(share.DefaultWindowBytes))
	}
	if c.CacheBytes < 0 {
		bad("CacheBytes", "%d: must be >= 0 (0 turns caching off)", c.CacheBytes)
	}
	if a := c.Autocache; a.ProfileElements < 1 || a.ProbeBytes < 1 || a.ReadBytesPerSec < 0 || a.HeldTTL <= 0 || a.FetchTimeout <= 0 || a.MaxServing < 1 {
		bad("Autocache", "ProfileElements, ProbeBytes, HeldTTL, FetchTimeout and MaxServing must be > 0, ReadBytesPerSec >= 0")
	}
	if tc := c.Tenants; tc.MaxJobs < 1 || tc.MaxDatasets < 1 || tc.MaxStateBytes < 1 || tc.MaxConsumers < 1 || tc.MaxJobNodes < 0 || tc.AdminReserve < 0 || tc.DatasetGCAfter < 0 ||
		tc.AdminReserve >= fsm.MaxJobs || tc.AdminReserve >= fsm.MaxDatasets {
		bad("Tenants", "MaxJobs, MaxDatasets, MaxStateBytes and MaxConsumers must be > 0, MaxJobNodes and DatasetGCAfter >= 0 (0: no bound, keep), AdminReserve 0 to %d", min(fsm.MaxJobs, fsm.MaxDatasets)-1)
	}
}

func (c *Config) advertiseIP() string {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr
	}
	return c.BindAddr
}
