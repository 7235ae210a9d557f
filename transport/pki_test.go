package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCAAndCertificates(t *testing.T) {
	ca, err := NewCA("prod", 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := caCluster(ca.Cert); err != nil || got != "prod" {
		t.Fatalf("CA records cluster %q (%v), want prod", got, err)
	}
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero || ca.Cert.MaxPathLen != 0 {
		t.Fatalf("CA: IsCA %v, MaxPathLen %d (zero %v); want a CA that signs leaves only", ca.Cert.IsCA, ca.Cert.MaxPathLen, ca.Cert.MaxPathLenZero)
	}

	for _, c := range []struct {
		id  Identity
		eku []x509.ExtKeyUsage
	}{
		{Identity{Role: RoleNode, Name: "n1"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{Identity{Role: RoleClient, Name: "alice"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{Identity{Role: RoleClient, Name: "bob", Tenant: "vision"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{Identity{Role: RoleClient, Name: "ops", Tenant: "infra", Admin: true}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		certPEM, keyPEM, err := ca.Issue(c.id, CertOptions{ValidFor: time.Hour, DNSNames: []string{"n1.example"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(certPEM)
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		id, err := certIdentity(cert)
		want := Identity{Cluster: "prod", Role: c.id.Role, Name: c.id.Name, Tenant: c.id.Tenant, Admin: c.id.Admin}
		if err != nil || id != want {
			t.Errorf("%s: identity %v (%v), want %v", c.id.Name, id, err, want)
		}
		if !slices.Equal(cert.ExtKeyUsage, c.eku) {
			t.Errorf("%s: EKU %v, want %v", id, cert.ExtKeyUsage, c.eku)
		}
		if k, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want ECDSA P-256", id, cert.PublicKey)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(ca.Cert), KeyUsages: c.eku}); err != nil {
			t.Errorf("%s: does not verify against its CA: %v", id, err)
		}
		if kb, _ := pem.Decode(keyPEM); kb == nil || kb.Type != "PRIVATE KEY" {
			t.Errorf("%s: key PEM is not PKCS #8", id)
		}
		if c.id.Role == RoleNode && !slices.Contains(cert.DNSNames, "localhost") {
			t.Errorf("node certificate DNS names %v lack localhost", cert.DNSNames)
		}
	}

	if _, _, err := ca.Issue(Identity{Role: RoleNode, Name: "n1"}, CertOptions{ValidFor: 72 * time.Hour}); err == nil || !strings.Contains(err.Error(), "outlive its CA") {
		t.Errorf("a certificate outliving the CA: %v", err)
	}
	if _, _, err := ca.Issue(Identity{Role: RoleNode, Name: "n2", Tenant: "vision"}, CertOptions{}); err == nil {
		t.Error("a node certificate with a tenant was issued")
	}
	if _, _, err := ca.Issue(Identity{Role: RoleClient, Name: "c", Tenant: "bad/tenant"}, CertOptions{}); err == nil {
		t.Error("a tenant with a slash was issued")
	}
	if _, _, err := ca.Issue(Identity{Role: RoleNode, Name: "bad/name"}, CertOptions{}); err == nil {
		t.Error("a name with a slash was issued")
	}
	if _, _, err := ca.Issue(Identity{Cluster: "other", Role: RoleNode, Name: "n1"}, CertOptions{}); err == nil {
		t.Error("a certificate of another cluster was issued")
	}
	if _, err := NewCA("Prod!", time.Hour); err == nil {
		t.Error("NewCA accepted an invalid cluster name")
	}
}

func TestLoadCAAndWriteNewFiles(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA("prod", time.Hour)
	kp, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := WriteNewFiles(OutputFile{certFile, ca.CertPEM(), 0o644}, OutputFile{keyFile, kp, 0o600}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(keyFile); st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	loaded, err := LoadCA(certFile, keyFile)
	if err != nil || loaded.Cluster != "prod" {
		t.Fatalf("LoadCA: %v, cluster %v", err, loaded)
	}

	// Nothing is overwritten, and nothing is written when one file exists.
	other := filepath.Join(dir, "new.crt")
	err = WriteNewFiles(OutputFile{other, []byte("x"), 0o644}, OutputFile{keyFile, []byte("y"), 0o600})
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("overwrite: %v", err)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("%s was written although another file existed", other)
	}
	if b, _ := os.ReadFile(keyFile); string(b) != string(kp) {
		t.Error("the existing key was overwritten")
	}

	// A key of another CA, and a leaf as CA, are refused.
	ca2, _ := NewCA("prod", time.Hour)
	kp2, _ := ca2.KeyPEM()
	key2 := filepath.Join(dir, "ca2.key")
	os.WriteFile(key2, kp2, 0o600)
	if _, err := LoadCA(certFile, key2); err == nil {
		t.Error("LoadCA accepted a key that is not the certificate's")
	}
	leafPEM, leafKey, _ := ca.Issue(Identity{Role: RoleNode, Name: "n1"}, CertOptions{ValidFor: time.Minute})
	lc, lk := filepath.Join(dir, "n1.crt"), filepath.Join(dir, "n1.key")
	os.WriteFile(lc, leafPEM, 0o644)
	os.WriteFile(lk, leafKey, 0o600)
	if _, err := LoadCA(lc, lk); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("LoadCA of a node certificate: %v", err)
	}
}

func TestParseIdentity(t *testing.T) {
	id, err := ParseIdentity("spiffe://prod/node/n-1.a_b")
	if err != nil || id != (Identity{Cluster: "prod", Role: RoleNode, Name: "n-1.a_b"}) || id.String() != "spiffe://prod/node/n-1.a_b" {
		t.Fatalf("ParseIdentity: %v %v", id, err)
	}
	for _, bad := range []string{
		"https://prod/node/n1", "spiffe://prod/admin/n1", "spiffe://prod/node/", "spiffe://prod/node/a/b",
		"spiffe://Prod/node/n1", "spiffe://prod:1/node/n1", "spiffe://u@prod/node/n1", "spiffe://prod/node/n1?x",
		"spiffe://prod/node/n%2F1", "spiffe://prod", "spiffe:prod/node/n1", "spiffe://prod/node/-n",
	} {
		if id, err := ParseIdentity(bad); err == nil {
			t.Errorf("ParseIdentity(%q) = %v, want an error", bad, id)
		}
	}
	if s := (Identity{}).String(); s != "unauthenticated" {
		t.Errorf("zero identity prints %q", s)
	}
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// FuzzCertTenancy parses a certificate's organizational units, where the
// CA records a client's tenant and administrator's unit (the policy a
// certificate carries), from arbitrary units: it never panics; a client
// it accepts has at most one tenant, valid, that one of the units names
// (tenant=T), and is an administrator exactly when a unit is "admin"; a
// node never gets a tenant nor the administrator's unit.
func FuzzCertTenancy(f *testing.F) {
	f.Add("client", "tenant=vision", "admin")
	f.Add("client", "tenant=a", "tenant=b")
	f.Add("node", "tenant=vision", "admin")
	f.Add("client", "tenant=", "tenant=../x")
	f.Fuzz(func(t *testing.T, role, u1, u2 string) {
		id0 := Identity{Cluster: "prod", Role: Role(role), Name: "x"}
		if id0.Validate() != nil {
			return
		}
		c := &x509.Certificate{URIs: []*url.URL{id0.URI()}, Subject: pkix.Name{CommonName: "x", OrganizationalUnit: []string{role, u1, u2}}}
		id, err := certIdentity(c)
		if err != nil {
			return
		}
		units := []string{role, u1, u2}
		switch {
		case id.Role == RoleNode && (id.Tenant != "" || id.Admin):
			t.Fatalf("node %+v got a tenant or the administrator's unit", id)
		case id.Role == RoleClient && id.Admin != slices.Contains(units, AdminUnit):
			t.Fatalf("units %q: admin %v", units, id.Admin)
		case id.Tenant != "" && (ValidateTenant(id.Tenant) != nil || !slices.Contains(units, TenantUnitPrefix+id.Tenant)):
			t.Fatalf("units %q: tenant %q", units, id.Tenant)
		}
	})
}
