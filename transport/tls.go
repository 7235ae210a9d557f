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
	"time"
)

// Files DevTLS keeps in its directory.
const (
	devCertFile = "node.crt"
	devKeyFile  = "node.key"
)

// DevTLS loads, or creates on first use, a self-signed ECDSA P-256 certificate and
// key in dir (node.crt, node.key with mode 0600) and returns TLS 1.3 configs with
// the feedmesh ALPN. The client config does not verify the peer: traffic is
// encrypted but not authenticated. Use MutualTLS outside development.
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

// MutualTLS returns configs for mutual TLS: the server requires a client
// certificate and both sides verify the peer's chain against the CA in caFile,
// and present the certificate in certFile/keyFile.
//
// Host names are not checked: nodes dial each other by IP:port taken from
// gossip, so a peer is authenticated as "holds a certificate issued by the mesh
// CA", as in Consul with verify_server_hostname off.
func MutualTLS(caFile, certFile, keyFile string) (server, client *tls.Config, err error) {
	pool, err := loadCA(caFile)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("mutual tls: load %s and %s: %w", certFile, keyFile, err)
	}
	server = baseTLS()
	server.Certificates = []tls.Certificate{cert}
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.ClientCAs = pool
	client = baseTLS()
	client.Certificates = []tls.Certificate{cert}
	verifyChainOnly(client, pool)
	return server, client, nil
}

// ClientTLS returns the config of a CLI tool or training client. With caFile it
// verifies the server's chain against that CA (not the host name, see MutualTLS)
// and presents certFile/keyFile when given; with all three empty it is dev mode
// and does not verify the server.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := baseTLS()
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("client tls: give both certificate and key, or neither (cert %q, key %q)", certFile, keyFile)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
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
	verifyChainOnly(c, pool)
	return c, nil
}

func baseTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		NextProtos: []string{ALPN},
	}
}

func loadCA(caFile string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// verifyChainOnly makes a client config verify the server's chain against pool
// without checking the host name.
func verifyChainOnly(c *tls.Config, pool *x509.CertPool) {
	c.InsecureSkipVerify = true // the chain is verified below; only the name check is skipped.
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: peer presented no certificate")
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots:         pool,
			Intermediates: inter,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		})
		if err != nil {
			return fmt.Errorf("tls: verify peer certificate: %w", err)
		}
		return nil
	}
}
