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

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

var serial int64

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: name},
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
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+"-ca.crt")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a leaf certificate and key signed by the CA and returns their files.
func (ca *testCA) issue(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

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
	dir := t.TempDir()
	ca := newTestCA(t, dir, "mesh")
	other := newTestCA(t, dir, "other")
	certA, keyA := ca.issue(t, dir, "a")
	certB, keyB := ca.issue(t, dir, "b")
	certX, keyX := other.issue(t, dir, "x")

	srvA, cliA, err := MutualTLS(ca.file, certA, keyA)
	if err != nil {
		t.Fatal(err)
	}
	srvB, cliB, err := MutualTLS(ca.file, certB, keyB)
	if err != nil {
		t.Fatal(err)
	}
	a := startNode(t, nodeOpts{serverTLS: srvA, clientTLS: cliA})
	b := startNode(t, nodeOpts{serverTLS: srvB, clientTLS: cliB})
	a.echo(t, b.addr())
	b.echo(t, a.addr())

	// A CLI client with a certificate of the mesh CA is accepted.
	good, err := ClientTLS(ca.file, certA, keyA)
	if err != nil {
		t.Fatal(err)
	}
	startNode(t, nodeOpts{clientTLS: good, noServer: true}).echo(t, a.addr())

	reject := func(name string, c *tls.Config) {
		t.Helper()
		cli := startNode(t, nodeOpts{clientTLS: c, noServer: true})
		err := Call(testutil.Ctx(t, 2*time.Second), cli.t, cli.codec, a.addr(), "echo", "x", nil)
		if err == nil || !strings.Contains(err.Error(), "tls:") {
			t.Fatalf("%s: call returned %v, want a TLS rejection", name, err)
		}
		t.Logf("%s rejected: %v", name, err)
	}
	foreign, err := ClientTLS(ca.file, certX, keyX)
	if err != nil {
		t.Fatal(err)
	}
	reject("client certificate from another CA, not offered", foreign)
	// Go's client only offers a certificate matching the server's acceptable
	// CAs; force it, so the server's own chain verification is what rejects it.
	forced := foreign.Clone()
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreign.Certificates[0], nil
	}
	reject("client certificate from another CA, forced", forced)
	noCert, err := ClientTLS(ca.file, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reject("client without certificate", noCert)
	wrongCA, err := ClientTLS(other.file, certX, keyX)
	if err != nil {
		t.Fatal(err)
	}
	reject("client trusting another CA", wrongCA)

	// The servers still serve after the rejections.
	a.echo(t, b.addr())

	if _, err := ClientTLS("", certA, keyA); err == nil {
		t.Fatal("ClientTLS with a certificate but no CA succeeded")
	}
	if _, _, err := MutualTLS(filepath.Join(dir, "missing"), certA, keyA); err == nil {
		t.Fatal("MutualTLS with a missing CA file succeeded")
	}
}
