package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

func TestDevTLSPersistsIdentity(t *testing.T) {
	dir := t.TempDir()
	s1, c1, err := DevTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key mode %v, want 0600", st.Mode().Perm())
	}
	s2, _, err := DevTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if string(s1.Certificates[0].Certificate[0]) != string(s2.Certificates[0].Certificate[0]) {
		t.Fatal("second DevTLS generated a new certificate instead of loading the first")
	}
	if s1.MinVersion != tls.VersionTLS13 || c1.NextProtos[0] != ALPN || !c1.InsecureSkipVerify {
		t.Fatalf("dev configs: min version %x, ALPN %v, skip verify %v", s1.MinVersion, c1.NextProtos, c1.InsecureSkipVerify)
	}
	// Dev mode carries RPCs (every other test uses it too).
	srv := startNode(t, nodeOpts{serverTLS: s1, clientTLS: c1})
	cli := startNode(t, nodeOpts{noServer: true})
	cli.echo(t, srv.addr())
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t, "mesh")
	other := newPKI(t, "other")
	certA, keyA := p.issue(t, RoleNode, "a")
	certB, keyB := p.issue(t, RoleNode, "b")
	certC, keyC := p.issue(t, RoleClient, "c")
	certX, keyX := other.issue(t, RoleNode, "x")

	srvA, cliA, selfA, err := MutualTLS(p.caFile, certA, keyA)
	if err != nil {
		t.Fatal(err)
	}
	if selfA != (Identity{Cluster: "mesh", Role: RoleNode, Name: "a"}) {
		t.Fatalf("MutualTLS self %v", selfA)
	}
	srvB, cliB, _, err := MutualTLS(p.caFile, certB, keyB)
	if err != nil {
		t.Fatal(err)
	}
	a := startNode(t, nodeOpts{serverTLS: srvA, clientTLS: cliA})
	b := startNode(t, nodeOpts{serverTLS: srvB, clientTLS: cliB})
	a.echo(t, b.addr())
	b.echo(t, a.addr())

	// A CLI client with a client certificate of the mesh CA is accepted,
	// and so is one with a node's (an operator on a node's machine).
	for _, f := range [][2]string{{certC, keyC}, {certA, keyA}} {
		good, err := ClientTLS(p.caFile, f[0], f[1])
		if err != nil {
			t.Fatal(err)
		}
		startNode(t, nodeOpts{clientTLS: good, noServer: true}).echo(t, a.addr())
	}

	reject := func(name string, c *tls.Config) {
		t.Helper()
		cli := startNode(t, nodeOpts{clientTLS: c, noServer: true})
		err := Call(testutil.Ctx(t, 2*time.Second), cli.t, cli.codec, a.addr(), "echo", "x", nil)
		if err == nil || !strings.Contains(err.Error(), "tls:") {
			t.Fatalf("%s: call returned %v, want a TLS rejection", name, err)
		}
		t.Logf("%s rejected: %v", name, err)
	}
	foreign, err := ClientTLS(other.caFile, certX, keyX)
	if err != nil {
		t.Fatal(err)
	}
	reject("client trusting another CA", foreign)
	// Go's client only offers a certificate matching the server's acceptable
	// CAs; force it, so the server's own chain verification is what rejects it.
	forced := foreign.Clone()
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreign.Certificates[0], nil
	}
	forced.VerifyConnection = nil
	forced.InsecureSkipVerify = true
	reject("client certificate from another CA, forced", forced)
	noCert, err := ClientTLS(p.caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reject("client without certificate", noCert)

	// The servers still serve after the rejections.
	a.echo(t, b.addr())

	if _, err := ClientTLS("", certA, keyA); err == nil {
		t.Fatal("ClientTLS with a certificate but no CA succeeded")
	}
	if _, err := ClientTLS(p.caFile, certX, keyX); err == nil || !strings.Contains(err.Error(), "does not verify against the CA") {
		t.Fatalf("ClientTLS with a certificate of another CA: %v", err)
	}
	if _, _, _, err := MutualTLS(filepath.Join(p.dir, "missing"), certA, keyA); err == nil {
		t.Fatal("MutualTLS with a missing CA file succeeded")
	}
}

// TestCAWithoutCluster: a CA file whose CA records no cluster is refused
// with what to do.
func TestCAWithoutCluster(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "legacy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ca.crt")
	os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	_, err = ClientTLS(file, "", "")
	if err == nil || !strings.Contains(err.Error(), "names no cluster") || !strings.Contains(err.Error(), "feedmesh tls ca create") {
		t.Fatalf("a CA without cluster: %v", err)
	}
	t.Log(err)
}
