package mesh

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/feedmesh/feedmesh/transport"
)

// mutualTLS is a node's TLS under mutual TLS: its configs and the identity
// its certificate proves.
type mutualTLS struct {
	server, client *tls.Config
	self           transport.Identity
}

// loadMutualTLS loads the node's TLS files and checks that its certificate
// is a node certificate (transport.MutualTLS refuses a client's) whose name
// is the node's: Config.Name, or when that is empty the certificate's name
// becomes the node's.
func loadMutualTLS(cfg *Config) (*mutualTLS, error) {
	server, client, self, err := transport.MutualTLS(cfg.TLSCA, cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("load TLS files (TLSCA, TLSCert, TLSKey: --tls-ca, --tls-cert, --tls-key): %w", err)
	}
	if cfg.Name != "" && cfg.Name != self.Name {
		return nil, fmt.Errorf("node name %q (--name) is not the name in its certificate %s (%s): start the node as %q, or give it a certificate of its own: feedmesh tls cert create --node %s",
			cfg.Name, cfg.TLSCert, self, self.Name, cfg.Name)
	}
	return &mutualTLS{server: server, client: client, self: self}, nil
}

// exposed reports whether the node binds to or advertises an address other
// than loopback: then peers on the network can reach it.
func (c *Config) exposed() (addr string, yes bool) {
	for _, a := range []string{c.BindAddr, c.AdvertiseAddr} {
		if ip := net.ParseIP(a); ip != nil && !ip.IsLoopback() {
			return a, true
		}
	}
	return "", false
}

// checkSecure is Validate's rule "secure by default off loopback": a node
// reachable from the network needs mutual TLS and a gossip key, unless
// Insecure says the network is trusted.
func (c *Config) checkSecure(tlsSet bool) error {
	addr, exposed := c.exposed()
	if !exposed || c.Insecure {
		return nil
	}
	var missing []string
	if !tlsSet {
		missing = append(missing, "mutual TLS (TLSCA, TLSCert, TLSKey)")
	}
	if c.GossipKey == nil {
		missing = append(missing, "a gossip key (GossipKey)")
	}
	if len(missing) == 0 {
		return nil
	}
	what := missing[0]
	if len(missing) == 2 {
		what = missing[0] + " and " + missing[1]
	}
	return fmt.Errorf("the node listens on or advertises %s, which is not a loopback address, without %s: "+
		"anyone who reaches its ports could join the cluster, speak Raft and read its data. "+
		"Give it a certificate (feedmesh tls ca create, once per cluster; feedmesh tls cert create --node NAME, once per node; "+
		"then --tls-ca, --tls-cert, --tls-key) and a gossip key (head -c32 /dev/urandom | base64 > gossip.key; --gossip-key gossip.key), "+
		"or, on a trusted private network only, --insecure (Config.Insecure)", addr, what)
}
