package mesh_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/transport"
)

// testPKI is a cluster CA with its certificate file in a test directory.
type testPKI struct {
	ca     *transport.CA
	dir    string
	caFile string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	ca, err := transport.NewCA("prod", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, dir: t.TempDir()}
	p.caFile = filepath.Join(p.dir, "prod-ca.crt")
	if err := os.WriteFile(p.caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *testPKI) issue(t testing.TB, role transport.Role, name string) (certFile, keyFile string) {
	t.Helper()
	c, k, err := p.ca.Issue(transport.Identity{Role: role, Name: name}, transport.CertOptions{ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(p.dir, string(role)+"-"+name+".crt")
	keyFile = filepath.Join(p.dir, string(role)+"-"+name+".key")
	if err := transport.WriteNewFiles(transport.OutputFile{Path: certFile, Data: c, Mode: 0o644}, transport.OutputFile{Path: keyFile, Data: k, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// singleNode is a one-node config on loopback with free ports.
func singleNode(t *testing.T) mesh.Config {
	cfg := mesh.FastConfig()
	cfg.DataDir = t.TempDir()
	cfg.BindAddr = "127.0.0.1"
	cfg.GossipPort, cfg.Port = 0, 0
	cfg.DrainTimeout = 0
	return cfg
}

func startOrErr(t *testing.T, cfg mesh.Config) (*mesh.Node, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := mesh.Start(ctx, cfg)
	if n != nil {
		t.Cleanup(func() { n.Close() })
	}
	return n, err
}

// TestNodeNeedsItsOwnNodeCertificate: a node refuses to start with a
// client certificate (a trainer's), or with another node's certificate; a
// node given none of --name takes its certificate's name.
func TestNodeNeedsItsOwnNodeCertificate(t *testing.T) {
	p := newTestPKI(t)
	clientCert, clientKey := p.issue(t, transport.RoleClient, "alice")
	n1Cert, n1Key := p.issue(t, transport.RoleNode, "n1")

	cfg := singleNode(t)
	cfg.Name, cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = "alice", p.caFile, clientCert, clientKey
	n, err := startOrErr(t, cfg)
	if err == nil {
		t.Errorf("a node started with a client certificate as %s", n.Name())
	} else if !strings.Contains(err.Error(), "client certificate") || !strings.Contains(err.Error(), "feedmesh tls cert create --node") {
		t.Errorf("client certificate refused with %q; want it to say so and how to make a node certificate", err)
	} else {
		t.Log(err)
	}

	cfg = singleNode(t)
	cfg.Name, cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = "n2", p.caFile, n1Cert, n1Key
	n, err = startOrErr(t, cfg)
	if err == nil {
		t.Errorf("node %s started with n1's certificate", n.Name())
	} else if !strings.Contains(err.Error(), `"n2"`) || !strings.Contains(err.Error(), "spiffe://prod/node/n1") || !strings.Contains(err.Error(), "--node n2") {
		t.Errorf("name mismatch refused with %q; want both names and how to make n2's certificate", err)
	} else {
		t.Log(err)
	}

	cfg = singleNode(t)
	cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = p.caFile, n1Cert, n1Key
	n, err = startOrErr(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name() != "n1" {
		t.Errorf("node with n1's certificate and no name is called %q", n.Name())
	}
	if id, ok := n.Transport().LocalIdentity(); !ok || id.String() != "spiffe://prod/node/n1" {
		t.Errorf("node's identity %v (%v)", id, ok)
	}
}

// nonLoopbackIP is an address of this machine that is not loopback, or
// skips the test.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses (%v): the non-loopback case needs a machine with a network address", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if pc, err := net.ListenPacket("udp", net.JoinHostPort(ipn.IP.String(), "0")); err == nil {
			pc.Close()
			return ipn.IP.String()
		}
	}
	t.Skip("this machine has no IPv4 address besides loopback that a socket can bind: the non-loopback case cannot run here")
	return ""
}

// TestSecureByDefaultOffLoopback: a node bound to (or advertising) an
// address other than loopback refuses to start without mutual TLS and a
// gossip key, saying what to do; it starts with both, or with Insecure.
func TestSecureByDefaultOffLoopback(t *testing.T) {
	ip := nonLoopbackIP(t)
	p := newTestPKI(t)
	cert, key := p.issue(t, transport.RoleNode, "n1")
	gossipKey := make([]byte, 32)

	cfg := singleNode(t)
	cfg.Name, cfg.BindAddr = "n1", ip
	_, err := startOrErr(t, cfg)
	if err == nil {
		t.Fatalf("a node bound to %s started without mutual TLS and gossip key", ip)
	}
	for _, want := range []string{ip, "not a loopback address", "mutual TLS", "gossip key", "feedmesh tls ca create", "feedmesh tls cert create --node", "--gossip-key", "--insecure"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	t.Log(err)

	// Mutual TLS but no gossip key: refused, naming what is missing.
	cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = p.caFile, cert, key
	if _, err := startOrErr(t, cfg); err == nil || strings.Contains(err.Error(), "without mutual TLS") || !strings.Contains(err.Error(), "without a gossip key") {
		t.Errorf("mutual TLS without gossip key: %v", err)
	}

	// Both: starts, on the non-loopback address.
	cfg.GossipKey = gossipKey
	n, err := startOrErr(t, cfg)
	if err != nil {
		t.Fatalf("a secured node on %s: %v", ip, err)
	}
	if host, _, _ := net.SplitHostPort(n.Addr()); host != ip {
		t.Errorf("node advertises %s, want %s", n.Addr(), ip)
	}
	n.Close()

	// Neither, with Insecure: starts.
	cfg = singleNode(t)
	cfg.Name, cfg.BindAddr, cfg.Insecure = "n1", ip, true
	n, err = startOrErr(t, cfg)
	if err != nil {
		t.Fatalf("an insecure node on %s: %v", ip, err)
	}
	n.Close()

	// Advertising an outside address, or binding all of them, counts too;
	// loopback needs nothing.
	for _, c := range []struct{ bind, adv string }{{"127.0.0.1", ip}, {"0.0.0.0", "127.0.0.1"}} {
		cfg := singleNode(t)
		cfg.BindAddr, cfg.AdvertiseAddr = c.bind, c.adv
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("bind %s advertise %s: Validate %v, want the refusal", c.bind, c.adv, err)
		}
	}
	if cfg := singleNode(t); cfg.Validate() != nil {
		t.Errorf("loopback node: %v", cfg.Validate())
	}
}
