package transport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

// pki is a cluster's CA with its files in a test's directory.
type pki struct {
	ca     *CA
	dir    string
	caFile string
}

func newPKI(t testing.TB, cluster string) *pki {
	t.Helper()
	ca, err := NewCA(cluster, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pki{ca: ca, dir: dir, caFile: filepath.Join(dir, cluster+"-ca.crt")}
	if err := os.WriteFile(p.caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue writes the certificate and key of a node or client of the cluster.
func (p *pki) issue(t testing.TB, role Role, name string) (certFile, keyFile string) {
	t.Helper()
	c, k, err := p.ca.Issue(Identity{Role: role, Name: name}, CertOptions{ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, string(role)+"-"+name, c, k)
}

func (p *pki) write(t testing.TB, base string, certPEM, keyPEM []byte) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(p.dir, base+".crt"), filepath.Join(p.dir, base+".key")
	if err := WriteNewFiles(OutputFile{certFile, certPEM, 0o644}, OutputFile{keyFile, keyPEM, 0o600}); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// issueRaw signs a certificate from tmpl with the CA's key, as a CA holder
// signing something other than a feedmesh certificate would.
func (p *pki) issueRaw(t *testing.T, base string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl.SerialNumber, _ = randomSerial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca.Cert, &key.PublicKey, p.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := keyPEM(key)
	return p.write(t, base, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp)
}

func loadPair(t *testing.T, certFile, keyFile string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refused calls echo on srv from a client-only transport with conf and
// wants a TLS refusal.
func refused(t *testing.T, what string, conf *tls.Config, srv *node) {
	t.Helper()
	cli := startNode(t, nodeOpts{clientTLS: conf, noServer: true})
	err := Call(testutil.Ctx(t, 3*time.Second), cli.t, cli.codec, srv.addr(), "echo", "x", nil)
	if err == nil {
		t.Errorf("%s: accepted", what)
		return
	}
	if !strings.Contains(err.Error(), "tls") && !strings.Contains(err.Error(), "certificate") {
		t.Errorf("%s: call returned %v, want a TLS refusal", what, err)
		return
	}
	t.Logf("%s: refused: %v", what, err)
}

// TestServerWithClientCertRefused: a host holding only a client certificate
// (a trainer's) that poses as a node is refused by clients and by nodes
// dialling it: only node certificates serve.
func TestServerWithClientCertRefused(t *testing.T) {
	p := newPKI(t, "prod")
	aliceCert, aliceKey := p.issue(t, RoleClient, "alice")
	bobCert, bobKey := p.issue(t, RoleClient, "bob")
	nodeCert, nodeKey := p.issue(t, RoleNode, "n1")

	pool, err := loadCA(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	rogue := baseTLS()
	rogue.Certificates = []tls.Certificate{loadPair(t, aliceCert, aliceKey)}
	rogue.ClientAuth = tls.RequireAndVerifyClientCert
	rogue.ClientCAs = pool
	srv := startNode(t, nodeOpts{serverTLS: rogue, clientTLS: rogue})

	asClient, err := ClientTLS(p.caFile, bobCert, bobKey)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "a client dialling a server with a client certificate", asClient, srv)
	_, asNode, _, err := MutualTLS(p.caFile, nodeCert, nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "a node dialling a server with a client certificate", asNode, srv)

	// A node identity without the serverAuth key usage does not serve either.
	id := Identity{Cluster: "prod", Role: RoleNode, Name: "n2"}
	cf, kf := p.issueRaw(t, "no-server-auth", &x509.Certificate{
		Subject: pkix.Name{CommonName: "n2"}, URIs: []*url.URL{id.URI()},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	noServerAuth := rogue.Clone()
	noServerAuth.Certificates = []tls.Certificate{loadPair(t, cf, kf)}
	srv2 := startNode(t, nodeOpts{serverTLS: noServerAuth, clientTLS: noServerAuth})
	refused(t, "a client dialling a node certificate without serverAuth", asClient, srv2)
}

// TestPeerWithoutIdentityRefused: certificates the cluster's CA signed that
// name no feedmesh identity, or that another cluster's CA signed (both CAs
// trusted), are refused by a node, as a client and as a server.
func TestPeerWithoutIdentityRefused(t *testing.T) {
	p := newPKI(t, "prod")
	other := newPKI(t, "staging")
	nodeCert, nodeKey := p.issue(t, RoleNode, "n1")
	srvTLS, _, _, err := MutualTLS(p.caFile, nodeCert, nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := startNode(t, nodeOpts{serverTLS: srvTLS, clientTLS: srvTLS})

	// A certificate the CA signed for something else: no SPIFFE ID.
	plainCert, plainKey := p.issueRaw(t, "plain", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "n2"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	plain := baseTLS()
	plain.Certificates = []tls.Certificate{loadPair(t, plainCert, plainKey)}
	plain.InsecureSkipVerify = true
	refused(t, "a client certificate without identity", plain, srv)

	// A node certificate of another cluster, with the node trusting both CAs.
	both := filepath.Join(p.dir, "both-ca.crt")
	if err := os.WriteFile(both, append(p.ca.CertPEM(), other.ca.CertPEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	srvBoth, _, _, err := MutualTLS(both, nodeCert, nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := startNode(t, nodeOpts{serverTLS: srvBoth, clientTLS: srvBoth})
	// Another cluster's node, and one of its certificates claiming this cluster.
	for _, c := range []struct {
		base string
		id   Identity
	}{
		{"staging-node", Identity{Cluster: "staging", Role: RoleNode, Name: "n9"}},
		{"claims-prod", Identity{Cluster: "prod", Role: RoleNode, Name: "n9"}},
	} {
		cf, kf := other.issueRaw(t, c.base, &x509.Certificate{
			Subject:     pkix.Name{CommonName: c.id.Name},
			URIs:        []*url.URL{c.id.URI()},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		})
		conf := baseTLS()
		conf.Certificates = []tls.Certificate{loadPair(t, cf, kf)}
		conf.InsecureSkipVerify = true
		refused(t, "a client with "+c.id.String()+" signed by staging's CA", conf, srv2)
	}

	// A node of the other cluster, serving: a node dialling it refuses it.
	scf, skf := other.issue(t, RoleNode, "s1")
	stagingSrv, _, _, err := MutualTLS(both, scf, skf)
	if err != nil {
		t.Fatal(err)
	}
	staging := startNode(t, nodeOpts{serverTLS: stagingSrv, clientTLS: stagingSrv})
	_, prodClient, _, err := MutualTLS(both, nodeCert, nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "a prod node dialling a staging node", prodClient, staging)
}

// TestClientCertCannotRunNode: a trainer's client certificate does not make
// a node's TLS configs.
func TestClientCertCannotRunNode(t *testing.T) {
	p := newPKI(t, "prod")
	cf, kf := p.issue(t, RoleClient, "alice")
	_, _, _, err := MutualTLS(p.caFile, cf, kf)
	if err == nil || !strings.Contains(err.Error(), "client certificate") || !strings.Contains(err.Error(), "tls cert create --node") {
		t.Fatalf("MutualTLS with a client certificate: %v; want a refusal that says to make a node certificate", err)
	}
	t.Log(err)

	// Key usages: a node certificate must allow both ends, a client's the client end.
	node := Identity{Cluster: "prod", Role: RoleNode, Name: "n1"}
	cf, kf = p.issueRaw(t, "node-client-auth-only", &x509.Certificate{Subject: pkix.Name{CommonName: "n1"}, URIs: []*url.URL{node.URI()},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if _, _, _, err := MutualTLS(p.caFile, cf, kf); err == nil || !strings.Contains(err.Error(), "no serverAuth key usage") {
		t.Errorf("MutualTLS with a node certificate without serverAuth: %v", err)
	}
	alice := Identity{Cluster: "prod", Role: RoleClient, Name: "alice2"}
	cf, kf = p.issueRaw(t, "client-server-auth-only", &x509.Certificate{Subject: pkix.Name{CommonName: "alice2"}, URIs: []*url.URL{alice.URI()},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if _, err := ClientTLS(p.caFile, cf, kf); err == nil || !strings.Contains(err.Error(), "no clientAuth key usage") {
		t.Errorf("ClientTLS with a client certificate without clientAuth: %v", err)
	}
}

// TestPeerIdentity: under mutual TLS both ends of a connection learn who
// the other is (a node dialling a node, a client calling a node's RPC
// handler); in dev mode neither end is authenticated.
func TestPeerIdentity(t *testing.T) {
	p := newPKI(t, "prod")
	tlsOf := func(name string) (*tls.Config, *tls.Config) {
		cf, kf := p.issue(t, RoleNode, name)
		s, c, _, err := MutualTLS(p.caFile, cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	sa, ca := tlsOf("a")
	sb, cb := tlsOf("b")
	a := startNode(t, nodeOpts{serverTLS: sa, clientTLS: ca})
	b := startNode(t, nodeOpts{serverTLS: sb, clientTLS: cb})
	nodeA := Identity{Cluster: "prod", Role: RoleNode, Name: "a"}
	nodeB := Identity{Cluster: "prod", Role: RoleNode, Name: "b"}
	if id, ok := a.t.LocalIdentity(); !ok || id != nodeA {
		t.Errorf("a's LocalIdentity %v %v", id, ok)
	}

	// b dials a Raft stream to a: each end sees the other.
	checkEnds(t, b, a, KindRaft, nodeA, true, nodeB, true)

	// A client calls a: a's handler sees it; the client sees node a.
	whoami := func(ctx context.Context, _ func(any) error) (any, error) {
		id, ok := PeerFromContext(ctx)
		if !ok {
			return "unauthenticated", nil
		}
		return id.String(), nil
	}
	a.rpc.Handle("whoami", whoami)
	cf, kf := p.issue(t, RoleClient, "alice")
	aliceTLS, err := ClientTLS(p.caFile, cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	alice := startNode(t, nodeOpts{clientTLS: aliceTLS, noServer: true})
	var got string
	if err := Call(testutil.Ctx(t, 3*time.Second), alice.t, alice.codec, a.addr(), "whoami", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got != "spiffe://prod/client/alice" {
		t.Errorf("a's handler saw %q, want spiffe://prod/client/alice", got)
	}
	if id, ok := alice.t.LocalIdentity(); !ok || id.Role != RoleClient || id.Name != "alice" {
		t.Errorf("alice's LocalIdentity %v %v", id, ok)
	}
	checkEnds(t, alice, a, KindData, nodeA, true, Identity{Cluster: "prod", Role: RoleClient, Name: "alice"}, true)

	// Dev mode: no identity on either end.
	d1, d2 := startNode(t, nodeOpts{}), startNode(t, nodeOpts{})
	checkEnds(t, d1, d2, KindRaft, Identity{}, false, Identity{}, false)
	d2.rpc.Handle("whoami", whoami)
	if err := Call(testutil.Ctx(t, 3*time.Second), d1.t, d1.codec, d2.addr(), "whoami", nil, &got); err != nil || got != "unauthenticated" {
		t.Errorf("dev-mode handler saw %q (%v), want unauthenticated", got, err)
	}
	if _, ok := d1.t.LocalIdentity(); ok {
		t.Error("a dev-mode transport has a LocalIdentity")
	}
	if _, ok := PeerIdentity(nil); ok {
		t.Error("PeerIdentity(nil) is authenticated")
	}
}

// checkEnds opens a stream of kind from `from` to `to` and checks what
// PeerIdentity says on the dialling end (the server's identity) and on the
// accepting end (the dialler's).
func checkEnds(t *testing.T, from, to *node, kind StreamKind, wantServer Identity, serverOK bool, wantDialler Identity, diallerOK bool) {
	t.Helper()
	ctx := testutil.Ctx(t, 3*time.Second)
	s, err := from.t.Dial(ctx, to.addr(), kind)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if id, ok := PeerIdentity(s); ok != serverOK || id != wantServer {
		t.Errorf("dialling end of a %s stream sees %v (%v), want %v (%v)", kind, id, ok, wantServer, serverOK)
	}
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := to.t.Listener(kind).Accept()
		if err != nil {
			c = nil
		}
		acc <- c
	}()
	c := <-acc
	if c == nil {
		t.Fatal("accept failed")
	}
	defer c.Close()
	if id, ok := PeerIdentity(c); ok != diallerOK || id != wantDialler {
		t.Errorf("accepting end of a %s stream sees %v (%v), want %v (%v)", kind, id, ok, wantDialler, diallerOK)
	}
}
