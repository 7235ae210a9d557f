package transport

import (
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
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files DevTLS keeps in its directory.
const (
	devCertFile = "node.crt"
	devKeyFile  = "node.key"
)

// DevTLS loads, or creates on first use, a self-signed ECDSA P-256 certificate and
// key in dir (node.crt, node.key with mode 0600) and returns TLS 1.3 configs with
// the feedmesh ALPN. The client config does not verify the peer and the
// server asks for no certificate: traffic is encrypted but not
// authenticated, and PeerIdentity reports every peer unauthenticated. Use
// MutualTLS outside development.
func DevTLS(dir, nodeName string) (server, client *tls.Config, err error) {
	certPath, keyPath := filepath.Join(dir, devCertFile), filepath.Join(dir, devKeyFile)
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if errors.Is(err, os.ErrNotExist) {
		if err := writeSelfSigned(dir, nodeName, certPath, keyPath); err != nil {
			return nil, nil, err
		}
		cert, err = tls.LoadX509KeyPair(certPath, keyPath)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dev tls: load %s and %s: %w (delete both to regenerate)", certPath, keyPath, err)
	}
	server = baseTLS()
	server.Certificates = []tls.Certificate{cert}
	client = baseTLS()
	client.InsecureSkipVerify = true // dev mode: encrypted, not authenticated (documented).
	return server, client, nil
}

func writeSelfSigned(dir, nodeName, certPath, keyPath string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dev tls: create %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("dev tls: generate key: %w", err)
	}
	if nodeName == "" {
		nodeName = "feedmesh-node"
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("dev tls: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: nodeName, Organization: []string{"feedmesh dev"}},
		DNSNames:              []string{nodeName, "localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("dev tls: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("dev tls: marshal key: %w", err)
	}
	// Key first and exclusively: a concurrent first start must not mix two pairs.
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // a partial key or certificate is worse than none
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// MutualTLS returns a node's configs for mutual TLS, and the identity its
// certificate proves. The server requires a client certificate; both sides
// verify the peer's chain against the CA in caFile and then its identity
// (identity.go): the server accepts nodes and clients of the CA's cluster,
// the client (this node dialling a peer) accepts only nodes. certFile must
// hold a node certificate of that cluster: a client certificate, or one of
// no or another cluster, is refused here, before the node serves anything.
//
// Host names are not checked: nodes dial each other by IP:port taken from
// gossip, so a peer is authenticated by its SPIFFE ID, not by its address.
func MutualTLS(caFile, certFile, keyFile string) (server, client *tls.Config, self Identity, err error) {
	pool, err := loadCA(caFile)
	if err != nil {
		return nil, nil, Identity{}, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, Identity{}, fmt.Errorf("mutual tls: load %s and %s: %w", certFile, keyFile, err)
	}
	self, chain, err := ownIdentity(cert, pool, certFile, caFile)
	if err != nil {
		return nil, nil, Identity{}, err
	}
	if self.Role != RoleNode {
		return nil, nil, Identity{}, fmt.Errorf("mutual tls: %s is a %s certificate (%s): a node needs a node certificate: feedmesh tls cert create --node NAME", certFile, self.Role, self)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if !chainAllows(chain, u) {
			return nil, nil, Identity{}, fmt.Errorf("mutual tls: %s has no %s key usage: a node certificate needs serverAuth and clientAuth (feedmesh tls cert create --node makes them so)", certFile, usageName(u))
		}
	}
	server = baseTLS()
	server.Certificates = []tls.Certificate{cert}
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.ClientCAs = pool
	server.VerifyConnection = verifyClient(self.Cluster)
	client = baseTLS()
	client.Certificates = []tls.Certificate{cert}
	verifyServer(client, pool, self.Cluster)
	return server, client, self, nil
}

// ClientTLS returns the config of a CLI tool or training client. With caFile
// it accepts only servers with a node certificate of the CA's cluster (see
// MutualTLS) and presents certFile/keyFile when given: a client or node
// certificate of that cluster. With all three empty it is dev mode and does
// not verify the server.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := baseTLS()
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("client tls: give both certificate and key, or neither (cert %q, key %q)", certFile, keyFile)
	}
	var cert tls.Certificate
	if certFile != "" {
		var err error
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("client tls: load %s and %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if caFile == "" {
		if certFile != "" {
			return nil, errors.New("client tls: a client certificate needs the CA file to verify the server")
		}
		c.InsecureSkipVerify = true // dev mode: encrypted, not authenticated (documented).
		return c, nil
	}
	pool, err := loadCA(caFile)
	if err != nil {
		return nil, err
	}
	cluster := "" // without a certificate: any cluster whose CA is in caFile
	if certFile != "" {
		self, chain, err := ownIdentity(cert, pool, certFile, caFile)
		if err != nil {
			return nil, err
		}
		cluster = self.Cluster
		if !chainAllows(chain, x509.ExtKeyUsageClientAuth) {
			return nil, fmt.Errorf("client tls: %s has no clientAuth key usage: a client certificate needs it (feedmesh tls cert create --client makes it so)", certFile)
		}
	}
	verifyServer(c, pool, cluster)
	return c, nil
}

func baseTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		NextProtos: []string{ALPN},
	}
}

// loadCA reads the CA certificates of caFile (PEM). Each must record the
// cluster it signs for (a URI SAN spiffe://<cluster>, identity.go).
func loadCA(caFile string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := pemBytes; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file %s: %w", caFile, err)
		}
		if _, err := caCluster(c); err != nil {
			return nil, fmt.Errorf("tls: CA file %s: %w", caFile, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// ownIdentity checks that this side's certificate chains to the CA and
// names an identity of its cluster, and returns it with that chain.
func ownIdentity(cert tls.Certificate, pool *x509.CertPool, certFile, caFile string) (Identity, []*x509.Certificate, error) {
	certs, err := parseChain(cert)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("tls: parse %s: %w", certFile, err)
	}
	chains, err := verifyPeerChain(certs, pool)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("tls: %s does not verify against the CA in %s (made by another CA, or expired?): %w", certFile, caFile, err)
	}
	id, chain, err := identityChain(chains)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("tls: %s: %w", certFile, err)
	}
	return id, chain, nil
}

// parseChain is a loaded certificate's chain, leaf first.
func parseChain(cert tls.Certificate) ([]*x509.Certificate, error) {
	certs := make([]*x509.Certificate, 0, len(cert.Certificate))
	for i, der := range cert.Certificate {
		if i == 0 && cert.Leaf != nil {
			certs = append(certs, cert.Leaf)
			continue
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs, nil
}

// chainAllows reports whether a verified chain may be used for u, as Go's
// verification checks extended key usages: every certificate that names
// some must name u or any. (Checking the chain verifyPeerChain returned
// spares a second verification.)
func chainAllows(chain []*x509.Certificate, u x509.ExtKeyUsage) bool {
	for _, c := range chain {
		if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
			continue
		}
		if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) && !slices.Contains(c.ExtKeyUsage, u) {
			return false
		}
	}
	return true
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	}
	return fmt.Sprintf("EKU %d", u)
}

// verifyClient is a node server's check of a connecting peer, after Go has
// verified its chain against the CA (RequireAndVerifyClientCert, clientAuth):
// the peer is a node or a client of cluster, and of the CA that signed it.
func verifyClient(cluster string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 {
			return errors.New("tls: the peer's certificate was not verified")
		}
		id, err := chainsIdentity(cs.VerifiedChains)
		if err != nil {
			return fmt.Errorf("tls: refused the peer's certificate: %w", err)
		}
		if id.Cluster != cluster {
			return fmt.Errorf("tls: refused the peer's certificate: %s is of cluster %q, this node of %q", id, id.Cluster, cluster)
		}
		return nil
	}
}

// verifyServer makes a dialling config verify the server's chain against
// pool, without checking the host name, and accept only a node certificate
// of cluster ("": of the cluster of the CA that signed it). RootCAs is set
// too (Go does not use it when InsecureSkipVerify is set): PeerIdentity
// verifies against it.
func verifyServer(c *tls.Config, pool *x509.CertPool, cluster string) {
	c.RootCAs = pool
	c.InsecureSkipVerify = true // the chain and identity are verified below; only the host name check is skipped.
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		chains, err := verifyPeerChain(cs.PeerCertificates, pool)
		if err != nil {
			return fmt.Errorf("tls: verify the server's certificate: %w", err)
		}
		id, chain, err := identityChain(chains)
		if err != nil {
			return fmt.Errorf("tls: refused the server's certificate: %w", err)
		}
		if cluster != "" && id.Cluster != cluster {
			return fmt.Errorf("tls: refused the server's certificate: %s is of cluster %q, not %q", id, id.Cluster, cluster)
		}
		if id.Role != RoleNode {
			return fmt.Errorf("tls: refused the server's certificate: it is %s, a %s certificate: only nodes serve", id, id.Role)
		}
		if !chainAllows(chain, x509.ExtKeyUsageServerAuth) {
			return fmt.Errorf("tls: refused the server's certificate (%s): no serverAuth key usage", id)
		}
		return nil
	}
}

// verifyPeerChain verifies a peer's certificates (leaf first) against pool.
func verifyPeerChain(certs []*x509.Certificate, pool *x509.CertPool) ([][]*x509.Certificate, error) {
	if len(certs) == 0 {
		return nil, errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	return certs[0].Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
}
