package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip: the node's memberlist (its transport, timing and delegates), and
// joining: the --join addresses at start, the members recorded in the data
// dir when restarted without them (knownmembers.go), and retrying in the
// background until one answers.

func (n *Node) startGossip(ctx context.Context) error {
	cfg := n.cfg
	// With port 0, memberlist listens on TCP at an ephemeral port and then
	// on UDP at the same number, which another socket may hold: pick again,
	// up to 10 times, as memberlist.Create does for its own transport.
	attempts := 1
	if cfg.GossipPort == 0 {
		attempts = 10
	}
	var (
		nt  *memberlist.NetTransport
		err error
	)
	for range attempts {
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{cfg.BindAddr},
			BindPort:  cfg.GossipPort,
			Logger:    newStdLogger(n.log, "memberlist"),
		})
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("listen for gossip on %s:%d: %w", cfg.BindAddr, cfg.GossipPort, err)
	}
	var gt memberlist.NodeAwareTransport = countingTransport{NodeAwareTransport: nt, c: &n.gossipCount}
	if cfg.WrapGossipTransport != nil {
		gt = cfg.WrapGossipTransport(gt)
	}
	n.delegate = &delegate{}
	if err := n.setMeta("none"); err != nil {
		nt.Shutdown()
		return err
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.name
	mc.Transport = gt
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = nt.GetAutoBindPort()
	mc.AdvertiseAddr = cfg.advertiseIP()
	mc.AdvertisePort = nt.GetAutoBindPort()
	mc.ProbeInterval = cfg.Gossip.ProbeInterval
	mc.ProbeTimeout = cfg.Gossip.ProbeTimeout
	mc.SuspicionMult = cfg.Gossip.SuspicionMult
	mc.SuspicionMaxTimeoutMult = cfg.Gossip.SuspicionMaxTimeoutMult
	mc.GossipInterval = cfg.Gossip.GossipInterval
	mc.PushPullInterval = cfg.Gossip.PushPullInterval
	mc.TCPTimeout = cfg.Gossip.TCPTimeout
	mc.GossipToTheDeadTime = cfg.Gossip.GossipToTheDeadTime
	mc.DeadNodeReclaimTime = cfg.Gossip.DeadNodeReclaimTime
	mc.Delegate = n.delegate
	mc.Events = n.members
	n.admit = newAdmission(n)
	mc.Alive = n.admit
	mc.Logger = newStdLogger(n.log, "memberlist")
	if cfg.GossipKey != nil {
		mc.SecretKey = cfg.GossipKey
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		nt.Shutdown()
		return fmt.Errorf("start gossip: %w", err)
	}
	n.ml = ml
	n.admit.ml.Store(ml)
	// Read once: memberlist's LocalNode points into state that UpdateNode
	// rewrites, so reading it later would race.
	ln := ml.LocalNode()
	n.gossipAddr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	known := knownAddrs(n.knownAtStart, n.name)
	if len(cfg.Join) == 0 {
		if len(known) == 0 {
			return nil
		}
		// Restarted without --join: rejoin the members this node last saw,
		// in the background, so that Start does not wait on members that
		// are down too (this node may be the first one back).
		n.log.Info("rejoining the members known from the data dir", "members", len(known), "file", knownMembersFile)
		n.wg.Add(1)
		go n.retryJoin(nil, known, n.rejoinInterval(), true)
		return nil
	}
	addrs, rerr := n.resolveJoin(ctx, cfg.Join)
	joined := 0
	if len(addrs) > 0 {
		joined, err = ml.Join(addrs)
	}
	if joined > 0 {
		if err != nil {
			n.log.Warn("some join addresses did not answer", "joined", joined, "err", err)
		}
		return nil
	}
	jerr := joinError(cfg.Join, addrs, errors.Join(rerr, err))
	if errors.Is(jerr, ErrGossipKeyMismatch) || cfg.RetryJoinInterval <= 0 {
		return jerr
	}
	// Nodes of a new cluster start in any order: keep trying, like
	// Consul's retry_join, rather than making start order matter,
	// resolving the names in --join again each time (a headless Service
	// lists each pod once it has an address); a restarted node tries the
	// members it knew as well.
	n.log.Warn("join failed, retrying in the background", "every", cfg.RetryJoinInterval, "err", jerr)
	n.wg.Add(1)
	go n.retryJoin(cfg.Join, known, cfg.RetryJoinInterval, false)
	return nil
}

// resolveJoin turns --join entries into gossip addresses: an IP (with
// its port) as it is, a DNS name into every address it resolves to, each
// with the entry's port (a Kubernetes headless Service, or a round-robin
// name, lists every node; all nodes use the same gossip port). An entry
// without a port takes this node's gossip port. This node's own address is
// left out: joining itself would count as joined while it knows nobody.
// Names are resolved by Config.Resolver (the system's resolver by
// default: /etc/hosts, then the DNS servers of /etc/resolv.conf), each
// within Gossip.TCPTimeout. It returns the addresses found and what
// failed; a name that resolves to nothing but this node is no error.
func (n *Node) resolveJoin(ctx context.Context, entries []string) ([]string, error) {
	res := n.cfg.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	selfIP := net.ParseIP(n.cfg.advertiseIP())
	selfPort := n.gossipPort()
	var out []string
	var errs []error
	add := func(ip net.IP, port int) {
		if ip.Equal(selfIP) && port == selfPort {
			return
		}
		a := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, e := range entries {
		host, portText, err := net.SplitHostPort(e)
		if err != nil { // no port
			host, portText = strings.Trim(e, "[]"), strconv.Itoa(selfPort)
		}
		port, err := strconv.Atoi(portText)
		if err != nil || port <= 0 || port > 65535 {
			errs = append(errs, fmt.Errorf("join address %q: bad port", e))
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			add(ip, port)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, n.cfg.Gossip.TCPTimeout)
		ips, err := res.LookupIPAddr(lctx, host)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("resolve %s: %w", host, err))
			continue
		}
		for _, ip := range ips {
			add(ip.IP, port)
		}
		n.log.Debug("join name resolved", "name", host, "addresses", len(ips))
	}
	return out, errors.Join(errs...)
}

// gossipPort is the port this node's gossip listens on.
func (n *Node) gossipPort() int {
	if _, p, err := net.SplitHostPort(n.gossipAddr); err == nil {
		if port, err := strconv.Atoi(p); err == nil {
			return port
		}
	}
	return n.cfg.GossipPort
}

// rejoinInterval is how often a restarted node retries the members it
// knew: RetryJoinInterval, or, when that is 0, the reconnect interval
// (0: one attempt).
func (n *Node) rejoinInterval() time.Duration {
	if n.cfg.RetryJoinInterval > 0 {
		return n.cfg.RetryJoinInterval
	}
	return n.cfg.Gossip.ReconnectInterval
}

// retryJoin joins the addresses that entries (--join, resolved anew at
// each attempt: resolveJoin) and known (the members recorded in the data
// dir) name, at once when now is set and then every interval, until one
// address answers or the node closes (with interval 0, it makes one
// attempt). It joins one address at a time so that Close waits for at
// most one dial (Gossip.TCPTimeout), not one per address that is down.
func (n *Node) retryJoin(entries, known []string, every time.Duration, now bool) {
	defer n.wg.Done()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for attempt := 1; ; attempt++ {
		if !now || attempt > 1 {
			if tick == nil {
				return
			}
			select {
			case <-n.ctx.Done():
				return
			case <-tick:
			}
		}
		addrs, rerr := n.resolveJoin(n.ctx, entries)
		addrs = union(addrs, known)
		joined, err := n.joinEach(addrs)
		if n.ctx.Err() != nil {
			return
		}
		if joined > 0 {
			n.log.Info("joined", "members", joined, "attempts", attempt)
			return
		}
		jerr := joinError(union(entries, known), addrs, errors.Join(rerr, err))
		if errors.Is(jerr, ErrGossipKeyMismatch) {
			n.log.Error("cannot join", "err", jerr)
		} else {
			n.log.Debug("join retry failed", "attempt", attempt, "err", jerr)
		}
	}
}

// joinEach joins addrs one by one, stopping early if the node closes, and
// returns how many answered and what the others said.
func (n *Node) joinEach(addrs []string) (int, error) {
	joined := 0
	var errs []error
	for _, a := range addrs {
		if n.ctx.Err() != nil || n.leaving.Load() {
			break
		}
		k, err := n.ml.Join([]string{a})
		joined += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	return joined, errors.Join(errs...)
}

// union is a followed by the elements of b that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// joinError explains a failed join of entries (--join and known members),
// which resolved to addrs; a key mismatch is named as such, since
// memberlist's own words for it ("no installed keys could decrypt") send
// people looking in the wrong place.
func joinError(entries, addrs []string, err error) error {
	what := strings.Join(entries, ",")
	if !slices.Equal(entries, addrs) {
		what += " (" + strings.Join(addrs, ",") + ")"
		if len(addrs) == 0 {
			what = strings.Join(entries, ",") + " (no address but this node's)"
		}
	}
	if err == nil {
		return fmt.Errorf("join %s: no member answered", what)
	}
	msg := strings.ToLower(err.Error())
	if strings.Contains(msg, "decrypt") || strings.Contains(msg, "encrypt") || strings.Contains(msg, "keyring") {
		return fmt.Errorf("join %s: %w: this node's --gossip-key differs from the cluster's (or one side has none): %v",
			what, ErrGossipKeyMismatch, err)
	}
	return fmt.Errorf("join %s: %w", what, err)
}
