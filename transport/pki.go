package transport

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"time"
)

// A cluster's certificates: its CA (NewCA, `feedmesh tls ca create`) and the
// node and client certificates it signs (CA.Issue, `feedmesh tls cert
// create`), all ECDSA P-256. See identity.go for what they contain.

// CA is a cluster's certificate authority: the certificate that nodes and
// clients trust (their --tls-ca) and the key that signs their certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	Cluster string // the trust domain the CA records
}

// clockSkew backdates new certificates, so that a machine whose clock is a
// little behind accepts them at once.
const clockSkew = time.Hour

// NewCA creates the CA of cluster, valid for validFor. Its certificate
// records the cluster as a URI SAN spiffe://<cluster>; it may sign leaf
// certificates only (path length 0).
func NewCA(cluster string, validFor time.Duration) (*CA, error) {
	if err := ValidateCluster(cluster); err != nil {
		return nil, err
	}
	if validFor <= 0 {
		return nil, fmt.Errorf("CA validity %v: must be positive", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "feedmesh CA " + cluster, Organization: []string{"feedmesh"}},
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: cluster}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validFor),
		IsCA:                  true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, Cluster: cluster}, nil
}

// LoadCA reads a CA's certificate and key (PEM files, as NewCA's CertPEM
// and KeyPEM write them) and checks that they belong together and that the
// certificate records a cluster.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load CA %s and %s: %w", certFile, keyFile, err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse CA certificate %s: %w", certFile, err)
		}
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate (is it a node's or client's? give the CA's: --ca-cert)", certFile)
	}
	cluster, err := caCluster(cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key %s cannot sign", keyFile)
	}
	return &CA{Cert: cert, Key: key, Cluster: cluster}, nil
}

// CertPEM is the CA certificate in PEM, the file nodes and clients trust.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA key in PEM (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.Key) }

// CertOptions are the optional parts of a certificate CA.Issue makes.
type CertOptions struct {
	// ValidFor is how long the certificate is valid; it must end before the
	// CA does. Default one year.
	ValidFor time.Duration
	// IPs and DNSNames are added as SANs, for tools that check host names
	// (feedmesh checks the SPIFFE ID instead). A node certificate always
	// has localhost, 127.0.0.1 and ::1.
	IPs      []net.IP
	DNSNames []string
}

// DefaultCertValidity is how long CA.Issue's certificates are valid by default.
const DefaultCertValidity = 365 * 24 * time.Hour

// Issue makes a certificate and key for id (a node or a client of the CA's
// cluster; id.Cluster empty means the CA's) and returns them in PEM.
func (ca *CA) Issue(id Identity, o CertOptions) (certPEM, keyPEMBytes []byte, err error) {
	if id.Cluster == "" {
		id.Cluster = ca.Cluster
	}
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	if id.Cluster != ca.Cluster {
		return nil, nil, fmt.Errorf("identity %s: the CA is cluster %q's", id, ca.Cluster)
	}
	if o.ValidFor == 0 {
		o.ValidFor = DefaultCertValidity
	}
	now := time.Now()
	notAfter := now.Add(o.ValidFor)
	if o.ValidFor < 0 {
		return nil, nil, fmt.Errorf("certificate validity %v: must be positive", o.ValidFor)
	}
	if notAfter.After(ca.Cert.NotAfter) {
		return nil, nil, fmt.Errorf("a certificate valid until %s would outlive its CA (valid until %s): ask for at most %d days, or create a new CA",
			notAfter.Format(time.DateOnly), ca.Cert.NotAfter.Format(time.DateOnly), int(time.Until(ca.Cert.NotAfter)/(24*time.Hour)))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id.Name, OrganizationalUnit: units(id), Organization: []string{"feedmesh " + id.Cluster}},
		URIs:         []*url.URL{id.URI()},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		IPAddresses:  o.IPs,
		DNSNames:     o.DNSNames,
	}
	switch id.Role {
	case RoleNode:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = appendNew(tmpl.DNSNames, "localhost")
		tmpl.IPAddresses = appendNewIP(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	case RoleClient:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate of %s: %w", id, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

func appendNew(list []string, vs ...string) []string {
	for _, v := range vs {
		found := false
		for _, have := range list {
			found = found || have == v
		}
		if !found {
			list = append(list, v)
		}
	}
	return list
}

func appendNewIP(list []net.IP, vs ...net.IP) []net.IP {
	for _, v := range vs {
		found := false
		for _, have := range list {
			found = found || have.Equal(v)
		}
		if !found {
			list = append(list, v)
		}
	}
	return list
}

func keyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil // positive, never 0
}

// OutputFile is a file WriteNewFiles writes.
type OutputFile struct {
	Path string
	Data []byte
	Mode os.FileMode // 0600 for keys
}

// WriteNewFiles writes files that must not exist yet: it refuses, writing
// nothing, when any of them does, and removes what it wrote when one fails.
// A key (mode 0600) is created with that mode, never readable by others.
func WriteNewFiles(files ...OutputFile) error {
	for _, f := range files {
		if _, err := os.Lstat(f.Path); err == nil {
			return fmt.Errorf("%s already exists: not overwriting it (move it away, or choose another --dir or name)", f.Path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	var written []string
	for _, f := range files {
		if err := writeNew(f.Path, f.Data, f.Mode); err != nil {
			for _, p := range written {
				os.Remove(p)
			}
			return err
		}
		written = append(written, f.Path)
	}
	return nil
}

// units are a certificate's organizational units: its role, then its
// tenant and whether it is an administrator's (Identity.Tenant, Admin).
func units(id Identity) []string {
	u := []string{string(id.Role)}
	if id.Tenant != "" {
		u = append(u, TenantUnitPrefix+id.Tenant)
	}
	if id.Admin {
		u = append(u, AdminUnit)
	}
	return u
}
