package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	register(cli.Command{Name: "tls", Summary: "make a cluster's CA and its node and client certificates for mutual TLS (tls ca create, tls cert create)", Run: runTLS,
		Nested: []string{"ca create", "cert create"}})
}

const tlsUsage = `Usage: feedmesh tls ca create [--cluster NAME] [--dir DIR] [--days N]
       feedmesh tls cert create --node NAME | --client NAME [--dir DIR] [--ca-cert FILE --ca-key FILE] [--ip IP,...] [--dns NAME,...] [--tenant T] [--admin] [--days N]

Make the certificates of a cluster's mutual TLS, as consul tls does: once per
cluster a CA (it records the cluster's name), then a certificate per node and
per client (trainer, operator), ECDSA P-256. A node certificate names its node
(spiffe://CLUSTER/node/NAME): a node starts only with its own. A client
certificate (spiffe://CLUSTER/client/NAME) lets its holder connect to nodes;
a node refuses to start with one, and clients and nodes refuse a server that
presents one. Keys are written with mode 0600; no file is ever overwritten.

  feedmesh tls ca create --help     its flags
  feedmesh tls cert create --help   its flags
`

func runTLS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tlsUsage)
		return cli.ErrUsage
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stderr, tlsUsage)
		return flag.ErrHelp
	}
	if len(args) >= 2 && args[1] == "create" {
		switch args[0] {
		case "ca":
			return runCACreate(args[2:], stdout, stderr)
		case "cert":
			return runCertCreate(args[2:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "feedmesh tls: want `ca create` or `cert create`, got %q\n\n%s", strings.Join(args, " "), tlsUsage)
	return cli.ErrUsage
}

// tlsFlagSet is a flag set for `tls ca create` or `tls cert create`.
func tlsFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	return prog.NewFlagSet("tls "+name, synopsis, stderr)
}

func runCACreate(args []string, stdout, stderr io.Writer) error {
	fs := tlsFlagSet("ca create", "[--cluster NAME] [--dir DIR] [--days N]", stderr)
	cluster := fs.String("cluster", "feedmesh", "the cluster's name (lower-case letters, digits, '.', '_', '-'): the trust domain of its certificates, spiffe://NAME/...")
	dir := fs.String("dir", ".", "directory to write NAME-ca.crt and NAME-ca.key to (created if missing)")
	days := fs.Int("days", 5*365, "days the CA is valid; the certificates it signs cannot outlive it")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := transport.ValidateCluster(*cluster); err != nil {
		return cli.InputError(fmt.Errorf("--cluster: %w", err))
	}
	if *days <= 0 {
		return cli.InputError(fmt.Errorf("--days %d: must be positive", *days))
	}
	ca, err := transport.NewCA(*cluster, time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(*dir, *cluster+"-ca.crt"), filepath.Join(*dir, *cluster+"-ca.key")
	if err := transport.WriteNewFiles(
		transport.OutputFile{Path: certFile, Data: ca.CertPEM(), Mode: 0o644},
		transport.OutputFile{Path: keyFile, Data: keyPEM, Mode: 0o600},
	); err != nil {
		return err
	}
	self := invokedAs()
	dirFlag := ""
	if filepath.Clean(*dir) != "." {
		dirFlag = " --dir " + *dir
	}
	fmt.Fprintf(stdout, "wrote the CA of cluster %q (spiffe://%s, valid until %s):\n", *cluster, *cluster, ca.Cert.NotAfter.Format(time.DateOnly))
	fmt.Fprintf(stdout, "  %s  CA certificate: every node and client trusts it (--tls-ca)\n", certFile)
	fmt.Fprintf(stdout, "  %s  CA key, mode 0600: it signs the cluster's certificates; keep it secret and off the nodes\n", keyFile)
	fmt.Fprintf(stdout, "next, a certificate per node and per client:\n")
	fmt.Fprintf(stdout, "  %s tls cert create%s --node NAME     (once per node; --ip/--dns add its addresses for other tools)\n", self, dirFlag)
	fmt.Fprintf(stdout, "  %s tls cert create%s --client NAME   (once per trainer or operator)\n", self, dirFlag)
	return nil
}

func runCertCreate(args []string, stdout, stderr io.Writer) error {
	fs := tlsFlagSet("cert create", "--node NAME | --client NAME [flags]", stderr)
	node := fs.String("node", "", "make a node certificate for the node called NAME (its --name)")
	clientName := fs.String("client", "", "make a client certificate for NAME (a trainer, an operator): it connects to nodes, and cannot run one or serve")
	dir := fs.String("dir", ".", "directory to write the certificate and key to, and to find the CA in")
	caCert := fs.String("ca-cert", "", "the CA certificate (default: the one *-ca.crt in --dir)")
	caKey := fs.String("ca-key", "", "the CA key (default: --ca-cert's name with .key)")
	ips := fs.String("ip", "", "comma-separated IP addresses to add as SANs (for tools that check them; feedmesh checks the name)")
	dnsNames := fs.String("dns", "", "comma-separated DNS names to add as SANs")
	days := fs.Int("days", 365, "days the certificate is valid (at most until the CA expires)")
	tenant := fs.String("tenant", "", "with --client: the tenant (team) the client belongs to; it sees and acts on its tenant's jobs only (docs/operating/security.md, \"Tenants and permissions\"); default: the default tenant")
	admin := fs.Bool("admin", false, "with --client: an administrator's certificate (every tenant's jobs, the KV store)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var id transport.Identity
	switch {
	case *node != "" && *clientName != "":
		return cli.InputError(errors.New("give --node or --client, not both: a node certificate already lets its holder call nodes"))
	case *node != "":
		id = transport.Identity{Role: transport.RoleNode, Name: *node}
	case *clientName != "":
		id = transport.Identity{Role: transport.RoleClient, Name: *clientName}
	default:
		fmt.Fprintln(stderr, "feedmesh tls cert create: give --node NAME or --client NAME")
		fs.Usage()
		return cli.ErrUsage
	}
	if (*tenant != "" || *admin) && id.Role != transport.RoleClient {
		return cli.InputError(errors.New("--tenant and --admin are for client certificates: a node belongs to no tenant"))
	}
	id.Tenant, id.Admin = *tenant, *admin
	if *days <= 0 {
		return cli.InputError(fmt.Errorf("--days %d: must be positive", *days))
	}
	opts := transport.CertOptions{ValidFor: time.Duration(*days) * 24 * time.Hour, DNSNames: cli.SplitList(*dnsNames)}
	for _, s := range cli.SplitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return cli.InputError(fmt.Errorf("--ip %q: not an IP address", s))
		}
		opts.IPs = append(opts.IPs, ip)
	}
	certFile, keyFile, err := findCA(*dir, *caCert, *caKey)
	if err != nil {
		return cli.InputError(err)
	}
	ca, err := transport.LoadCA(certFile, keyFile)
	if err != nil {
		return cli.InputError(err)
	}
	id.Cluster = ca.Cluster
	if err := id.Validate(); err != nil {
		return cli.InputError(fmt.Errorf("--%s: %w", id.Role, err))
	}
	certPEM, keyPEM, err := ca.Issue(id, opts)
	if err != nil {
		return cli.InputError(err)
	}
	base := filepath.Join(*dir, fmt.Sprintf("%s-%s-%s", id.Cluster, id.Role, id.Name))
	outCert, outKey := base+".crt", base+".key"
	if err := transport.WriteNewFiles(
		transport.OutputFile{Path: outCert, Data: certPEM, Mode: 0o644},
		transport.OutputFile{Path: outKey, Data: keyPEM, Mode: 0o600},
	); err != nil {
		return err
	}
	valid := time.Now().Add(opts.ValidFor).Format(time.DateOnly)
	fmt.Fprintf(stdout, "wrote the %s certificate of %s%s (valid until %s), signed by the CA in %s:\n", id.Role, id, describeTenancy(id), valid, certFile)
	fmt.Fprintf(stdout, "  %s  certificate (--tls-cert)\n", outCert)
	fmt.Fprintf(stdout, "  %s  key, mode 0600 (--tls-key): only %s needs it\n", outKey, id.Name)
	self := invokedAs()
	if id.Role == transport.RoleNode {
		fmt.Fprintf(stdout, "next: copy %s and these two files to node %s and start it with\n", certFile, id.Name)
		fmt.Fprintf(stdout, "  %s node --name %s --tls-ca %s --tls-cert %s --tls-key %s --gossip-key gossip.key ...\n",
			self, id.Name, filepath.Base(certFile), filepath.Base(outCert), filepath.Base(outKey))
		fmt.Fprintf(stdout, "  (one gossip key for the whole cluster: head -c32 /dev/urandom | base64 > gossip.key)\n")
		return nil
	}
	fmt.Fprintf(stdout, "next: give %s and these two files to %s, who connects with\n", certFile, id.Name)
	fmt.Fprintf(stdout, "  %s members --addr NODE:7947 --tls-ca %s --tls-cert %s --tls-key %s\n",
		self, filepath.Base(certFile), filepath.Base(outCert), filepath.Base(outKey))
	fmt.Fprintf(stdout, "  feedmesh.Client(\"NODE:7947\", tls_ca=%q, tls_cert=%q, tls_key=%q)   (Python)\n",
		filepath.Base(certFile), filepath.Base(outCert), filepath.Base(outKey))
	return nil
}

// findCA is the CA's certificate and key files: as given, or the one
// *-ca.crt in dir and its .key.
func findCA(dir, certFile, keyFile string) (string, string, error) {
	if certFile == "" {
		matches, err := filepath.Glob(filepath.Join(dir, "*-ca.crt"))
		if err != nil {
			return "", "", err
		}
		var found []string // CA certificates only: a node called "ca" has a prod-node-ca.crt
		for _, m := range matches {
			if isCACert(m) {
				found = append(found, m)
			}
		}
		switch len(found) {
		case 0:
			return "", "", fmt.Errorf("no CA in %s (no *-ca.crt): create one with `feedmesh tls ca create`, or give --ca-cert and --ca-key", dir)
		case 1:
			certFile = found[0]
		default:
			return "", "", fmt.Errorf("several CAs in %s (%s): give --ca-cert (and --ca-key)", dir, strings.Join(found, ", "))
		}
	}
	if keyFile == "" {
		keyFile = strings.TrimSuffix(certFile, filepath.Ext(certFile)) + ".key"
		if _, err := os.Stat(keyFile); err != nil {
			return "", "", fmt.Errorf("no CA key %s next to %s: give --ca-key (the key `feedmesh tls ca create` wrote)", keyFile, certFile)
		}
	}
	return certFile, keyFile, nil
}

// isCACert reports whether file holds a CA certificate (PEM).
func isCACert(file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return false
	}
	c, err := x509.ParseCertificate(block.Bytes)
	return err == nil && c.IsCA
}

// describeTenancy says which tenant a client certificate is of, and
// whether it is an administrator's.
func describeTenancy(id transport.Identity) string {
	if id.Role != transport.RoleClient {
		return ""
	}
	t := "of the default tenant"
	if id.Tenant != "" {
		t = "of tenant " + id.Tenant
	}
	if id.Admin {
		t += ", an administrator"
	}
	return " (" + t + ")"
}
