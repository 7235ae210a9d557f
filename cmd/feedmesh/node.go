package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/observe"
)

func init() {
	register(cli.Command{Name: "node", Summary: "run a node (gossip member, worker, control endpoint, maybe a Raft voter)", Run: runNode})
}

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := prog.NewFlagSet("node", "[flags]", stderr)
	d := mesh.DefaultConfig()
	name := fs.String("name", "", "node name; default: the one stored in --data-dir, or a new one")
	dataDir := fs.String("data-dir", "", "directory for the node's identity, certificate and Raft state (required)")
	bind := fs.String("bind", d.BindAddr, "IP address to bind gossip and QUIC to")
	advertise := fs.String("advertise", "", "IP address other nodes reach this one at (default: --bind; required with --bind 0.0.0.0: in a pod, FEEDMESH_ADVERTISE from the downward API's status.podIP)")
	gossipPort := fs.Int("gossip-port", 7946, "gossip port (TCP and UDP)")
	port := fs.Int("port", 7947, "QUIC port (UDP): Raft, control and data")
	join := fs.String("join", "", "comma-separated gossip addresses (host:port) of nodes to join; give all you know. A DNS name stands for every address it resolves to (a Kubernetes headless Service) and is resolved again while the node retries; without :port, --gossip-port")
	expect := fs.Int("bootstrap-expect", 0, "form the first Raft group once this many nodes are seen (0 with no --join: single-node dev mode)")
	voters := fs.Int("raft-voters", d.RaftVoters, "number of Raft voters the leader maintains: 0 = auto (3, or 5 once 5 nodes are live), or 1, 3 or 5")
	voterGrace := fs.Duration("voter-grace", d.VoterGrace, "how long a voter may be dead before it is replaced")
	gossipKey := fs.String("gossip-key", "", "gossip encryption key: base64 of 32 bytes, or a file holding it")
	tlsCA := fs.String("tls-ca", "", "CA certificate (PEM) to verify peers and clients (mutual TLS; feedmesh tls ca create)")
	tlsCert := fs.String("tls-cert", "", "this node's certificate (PEM), signed by --tls-ca: feedmesh tls cert create --node NAME; with no --name, the node takes its name")
	tlsKey := fs.String("tls-key", "", "this node's private key (PEM)")
	insecure := fs.Bool("insecure", false, "let a node on a non-loopback address run without mutual TLS or without --gossip-key: only on a trusted private network (on loopback nothing is needed)")
	shareWindow := fs.Int64("share-window", d.Worker.ShareWindowBytes>>20, "MiB of batches a worker keeps per shared dataset for jobs that share it (share.window_bytes)")
	taskBudget := fs.Int64("task-memory-budget", d.Worker.TaskMemoryBudget>>20, "MiB the buffering ops (shuffle, batch, bucket, pack, prefetch) of one task's pipeline may hold together; a spec over it fails its job, naming the op (docs/operating/limits.md)")
	cacheBytes := fs.Int64("cache-bytes", d.CacheBytes, "bytes of autocached splits this node keeps on disk under --data-dir/cache, least recently used evicted beyond (0: no caching; autocache ops compute)")
	tenantJobs := fs.Int("tenant-max-jobs", d.Tenants.MaxJobs, "jobs one tenant may hold (docs/operating/security.md, \"Quotas and cleanup\"); administrators are not bound")
	tenantDatasets := fs.Int("tenant-max-datasets", d.Tenants.MaxDatasets, "datasets one tenant may have registered")
	tenantConsumers := fs.Int("tenant-max-consumers", d.Tenants.MaxConsumers, "consumers attached to one tenant's jobs together")
	tenantJobNodes := fs.Int("tenant-max-job-nodes", d.Tenants.MaxJobNodes, "nodes one job of a tenant may take: a new job must set max_workers (or workers) to at most this (0: no bound)")
	tenantBytes := fs.Int64("tenant-max-state-bytes", d.Tenants.MaxStateBytes, "bytes of dataset specs one tenant may hold in the replicated state")
	adminReserve := fs.Int("admin-reserve", d.Tenants.AdminReserve, "job and dataset slots of the cluster's limits (4096 each) that only administrators may take")
	datasetGC := fs.Duration("dataset-gc-after", d.Tenants.DatasetGCAfter, "remove a dataset once no job has read it for this long (0: keep datasets)")
	policyFile := fs.String("policy", "", "a policy `FILE` (YAML) of roles and bindings narrowing each tenant's job names and the data roots, stores and hosts its jobs read (docs/operating/security.md#roles-and-grants); give every node the same. Default: none (tenants are kept apart, nothing narrowed)")
	tc := d.Transport
	maxConns := fs.Int("max-conns", tc.MaxIncomingConns, "incoming QUIC connections in total (docs/operating/limits.md)")
	maxConnsPerAddr := fs.Int("max-conns-per-addr", tc.MaxConnsPerAddr, "incoming connections from one remote IP")
	maxDataStreams := fs.Int("max-data-streams", tc.MaxDataStreams, "data (batch) streams served at once, from all peers; more are refused with a clear error")
	maxDataStreamsPerAddr := fs.Int("max-data-streams-per-addr", tc.MaxDataStreamsPerAddr, "data streams served at once to one remote IP")
	maxRPCs := fs.Int("max-concurrent-rpcs", tc.MaxConcurrentRPCs, "control requests served at once")
	maxRPCStreamsPerConn := fs.Int("max-rpc-streams-per-conn", tc.MaxRPCStreamsPerConn, "open control streams per connection; more are reset")
	maxRPCStreamsPerAddr := fs.Int("max-rpc-streams-per-addr", tc.MaxRPCStreamsPerAddr, "open control streams per remote IP")
	rpcIdle := fs.Duration("rpc-idle-timeout", tc.RPCIdleTimeout, "wait for a control request's next bytes (or for byte budget)")
	maxRPCBytes := fs.Int64("max-rpc-bytes", tc.MaxRPCBytesInFlight>>20, "MiB of control-request bytes the node holds")
	maxRPCBytesPerConn := fs.Int64("max-rpc-bytes-per-conn", tc.MaxRPCBytesPerConn>>20, "MiB of control-request bytes held per connection")
	initWindow := fs.Int64("initial-receive-window", int64(tc.InitialReceiveWindow>>10), "KiB of QUIC flow-control window each connection and stream starts with: what a peer may send unread per connection")
	maxWindow := fs.Int64("max-receive-window", tc.MaxReceiveWindowBytes>>20, "MiB by which QUIC flow-control windows may grow beyond --initial-receive-window each, all connections together")
	drainTimeout := fs.Duration("drain-timeout", d.DrainTimeout, "on SIGTERM/Ctrl-C, how long to drain before leaving: DYNAMIC tasks hand back unstarted splits and consumers read what is queued (0: leave at once; default of the fast preset: 10s); under Kubernetes keep terminationGracePeriodSeconds at least this plus 15s")
	preset := fs.String("preset", "default", "timing preset: default, or fast (in-process tests and demos)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics (/metrics), a status page (/) and its JSON (/status.json), and the health endpoints /livez and /readyz over HTTP on this host:port (default: off)")
	data := addDataFlags(fs, true)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	stores, err := data.namedStores()
	if err != nil {
		return err
	}
	cfg := d
	switch *preset {
	case "default":
	case "fast":
		cfg = mesh.FastConfig()
	default:
		return fmt.Errorf("--preset %q: want default or fast", *preset)
	}
	if *dataDir == "" {
		return fmt.Errorf("--data-dir is required (the node keeps its identity and Raft state there)")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %v", err)
	}
	key, err := loadGossipKey(*gossipKey)
	if err != nil {
		return err
	}
	cfg.Name, cfg.DataDir, cfg.BindAddr, cfg.AdvertiseAddr = *name, *dataDir, *bind, *advertise
	cfg.GossipPort, cfg.Port, cfg.Join, cfg.BootstrapExpect = *gossipPort, *port, cli.SplitList(*join), *expect
	cfg.RaftVoters, cfg.VoterGrace, cfg.GossipKey = *voters, *voterGrace, key
	cfg.TLSCA, cfg.TLSCert, cfg.TLSKey, cfg.Insecure = *tlsCA, *tlsCert, *tlsKey, *insecure
	if st, err := os.Stat(*gossipKey); *gossipKey != "" && err == nil && st.Mode().IsRegular() {
		cfg.GossipKeyFile = *gossipKey // kept out of the data roots
	}
	cfg.DataRoots, cfg.AllowHosts, cfg.ObjectStores = data.roots.vals, data.hosts.vals, stores
	if *policyFile != "" {
		if cfg.Policy, err = loadPolicy(*policyFile); err != nil {
			return err
		}
	}
	cfg.Worker.ShareWindowBytes = *shareWindow << 20
	if *taskBudget <= 0 || *taskBudget > 1<<40 {
		return fmt.Errorf("--task-memory-budget: %d MiB, want in [1, %d]", *taskBudget, 1<<40)
	}
	cfg.Worker.TaskMemoryBudget = *taskBudget << 20
	cfg.CacheBytes = *cacheBytes
	cfg.Tenants = mesh.TenantsConfig{MaxJobs: *tenantJobs, MaxDatasets: *tenantDatasets, MaxStateBytes: *tenantBytes, MaxConsumers: *tenantConsumers, MaxJobNodes: *tenantJobNodes, AdminReserve: *adminReserve, DatasetGCAfter: *datasetGC}
	if flagGiven(fs, "drain-timeout") { // else the preset's
		cfg.DrainTimeout = *drainTimeout
	}
	// The transport limits, where given (else the preset's).
	setInt := func(name string, dst *int, v int) {
		if flagGiven(fs, name) {
			*dst = v
		}
	}
	setInt64 := func(name string, dst *int64, v int64) {
		if flagGiven(fs, name) {
			*dst = v
		}
	}
	setInt("max-conns", &cfg.Transport.MaxIncomingConns, *maxConns)
	setInt("max-conns-per-addr", &cfg.Transport.MaxConnsPerAddr, *maxConnsPerAddr)
	setInt("max-data-streams", &cfg.Transport.MaxDataStreams, *maxDataStreams)
	setInt("max-data-streams-per-addr", &cfg.Transport.MaxDataStreamsPerAddr, *maxDataStreamsPerAddr)
	setInt("max-concurrent-rpcs", &cfg.Transport.MaxConcurrentRPCs, *maxRPCs)
	setInt("max-rpc-streams-per-conn", &cfg.Transport.MaxRPCStreamsPerConn, *maxRPCStreamsPerConn)
	setInt("max-rpc-streams-per-addr", &cfg.Transport.MaxRPCStreamsPerAddr, *maxRPCStreamsPerAddr)
	setInt64("max-rpc-bytes", &cfg.Transport.MaxRPCBytesInFlight, *maxRPCBytes<<20)
	setInt64("max-rpc-bytes-per-conn", &cfg.Transport.MaxRPCBytesPerConn, *maxRPCBytesPerConn<<20)
	setInt64("max-receive-window", &cfg.Transport.MaxReceiveWindowBytes, *maxWindow<<20)
	if flagGiven(fs, "initial-receive-window") {
		cfg.Transport.InitialReceiveWindow = uint64(max(*initWindow, 0)) << 10
	}
	if flagGiven(fs, "rpc-idle-timeout") {
		cfg.Transport.RPCIdleTimeout = *rpcIdle
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	logJPEGDecoder(cfg.Logger)
	for _, h := range nodeHooks {
		h(&cfg)
	}

	// The HTTP endpoints listen before the node starts: /livez answers
	// while it joins, /readyz says it is starting (Kubernetes' probes).
	var srv *observe.Server
	if *metricsAddr != "" {
		if srv, err = observe.ListenStarting(*metricsAddr, observe.Options{}); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer srv.Close()
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	n, err := mesh.Start(startCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "feedmesh node %s: QUIC %s, gossip %s (join it with --join %s)\n", n.Name(), n.Addr(), n.GossipAddr(), n.GossipAddr())
	if os.Getenv("FEEDMESH_QUIET") == "" && !strings.Contains(*logLevel, "error") {
		self := invokedAs()
		fmt.Fprintf(stdout, "  %s members --addr %s\n  %s status --addr %s\n", self, n.Addr(), self, n.Addr())
	}
	if srv != nil {
		srv.Attach(n)
		fmt.Fprintf(stdout, "  status page http://%s/, metrics http://%s/metrics, health http://%s/livez and /readyz\n", srv.Addr(), srv.Addr(), srv.Addr())
		if cfg.TLSCA != "" && !loopbackAddr(srv.Addr()) {
			cfg.Logger.Warn("/metrics names every tenant's jobs to whoever reaches --metrics-addr (plain HTTP; /status.json asks for an access token): serve it where only operators and the scraper reach it (docs/operating/security.md, \"Visibility and the audit log\")", "addr", srv.Addr())
		}
	}
	<-ctx.Done()
	if cfg.DrainTimeout > 0 {
		fmt.Fprintf(stdout, "shutting down: draining (up to %v), then leaving the cluster\n", cfg.DrainTimeout)
	} else {
		fmt.Fprintln(stdout, "shutting down (leaving the cluster)")
	}
	return n.Close()
}

// nodeHooks change a node's configuration before it starts: none in the
// product binary; test builds add theirs (testhooks.go, build tag
// feedmesh_testhooks).
var nodeHooks []func(*mesh.Config)

// invokedAs is how the user ran this binary, for the commands a node
// suggests: ./feedmesh as they typed it, or go run's form.
func invokedAs() string {
	a := os.Args[0]
	switch {
	case strings.Contains(a, "go-build"):
		return "go run ./cmd/feedmesh"
	case a == "":
		return "feedmesh"
	}
	return a
}

// loopbackAddr reports whether host:port is on a loopback address.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
