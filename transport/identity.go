package transport

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/quic-go/quic-go"
)

// Identities under mutual TLS.
//
// Every certificate of a feedmesh cluster names who holds it with one URI
// SAN, a SPIFFE ID (https://spiffe.io, X.509-SVID):
//
//	spiffe://<cluster>/node/<name>     a node of the cluster
//	spiffe://<cluster>/client/<name>   a trainer, an operator's CLI
//
// The trust domain <cluster> is the cluster's name. It is recorded in the CA
// certificate when the CA is created (a URI SAN spiffe://<cluster>, see NewCA;
// `feedmesh tls ca create --cluster NAME`), so a peer's certificate is
// accepted only when it chains to a CA of the CA file and names that CA's
// cluster: a certificate another cluster's CA signed, or one the CA signed
// for something else (no SPIFFE ID), is refused even when the CA file holds
// both CAs. The role is in the path, and also in the extended key usage (a
// node certificate has serverAuth and clientAuth, a client certificate only
// clientAuth), so a client certificate cannot serve even to a verifier that
// ignores the URI.
//
// Where it is checked (tls.go): a node's server verifies every connecting
// peer's chain (Go's client-certificate verification) and then its SPIFFE ID
// (either role); a dialling side (node or client) verifies the server's
// chain and requires the node role; MutualTLS refuses a node certificate
// that is not one, ClientTLS a certificate of no role. After the handshake
// PeerIdentity gives what the peer proved, on both ends of a connection, and
// RPC handlers find it in their context (PeerFromContext). In dev mode
// (DevTLS) nothing is verified and every peer is unauthenticated.
//
// What each role may do beyond serving (who may open Raft streams, be
// admitted to gossip, call worker.* methods as which worker) is for the
// layers above to decide from PeerIdentity; this package only proves it.

// Role is what a certificate allows its holder to be.
type Role string

// Roles.
const (
	// RoleNode is a cluster member: it serves control requests and data,
	// joins gossip and speaks Raft. Only a node certificate serves.
	RoleNode Role = "node"
	// RoleClient is a trainer or an operator's CLI: it calls nodes and reads
	// data. A server presenting it is refused; a node will not run with it.
	RoleClient Role = "client"
)

// Identity is who a peer proved to be with its certificate: its SPIFFE ID
// spiffe://<Cluster>/<Role>/<Name>. The zero Identity is an unauthenticated
// peer (dev mode); its String is "unauthenticated".
type Identity struct {
	Cluster string // the trust domain: the cluster's name, as its CA records it
	Role    Role
	Name    string // a node's name (as in gossip and Raft), or a client's
	// Tenant (a client's) is the team the certificate's holder belongs to,
	// "" for the default tenant: an organizational unit "tenant=<name>"
	// of the certificate's subject (`feedmesh tls cert create --tenant`).
	// Admin is an organizational unit "admin": the holder administers the
	// cluster (every tenant's jobs, the KV store). Like the SPIFFE ID, they
	// are what the cluster's CA signed; mesh decides what they allow
	// (docs/operating/security.md, "Tenants and permissions").
	Tenant string
	Admin  bool
}

// AdminUnit is the organizational unit that makes a client certificate an
// administrator's; TenantUnitPrefix prefixes the one naming its tenant.
const (
	AdminUnit        = "admin"
	TenantUnitPrefix = "tenant="
)

// ValidateTenant reports whether name can name a tenant: as a client's
// name (letters, digits, '.', '_' and '-', at most 128).
func ValidateTenant(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("tenant %q: use letters, digits, '.', '_' and '-', starting with a letter or digit (at most 128)", name)
	}
	return nil
}

// Authenticated reports whether the identity was proved by a certificate
// (false for the zero Identity).
func (id Identity) Authenticated() bool { return id.Role != "" }

// IsNode reports whether the peer proved to be a node of its cluster.
func (id Identity) IsNode() bool { return id.Role == RoleNode }

// String is the SPIFFE ID, or "unauthenticated".
func (id Identity) String() string {
	if !id.Authenticated() {
		return "unauthenticated"
	}
	return "spiffe://" + id.Cluster + "/" + string(id.Role) + "/" + id.Name
}

// URI is the SPIFFE ID as a URL, for a certificate's URI SAN.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.Cluster, Path: "/" + string(id.Role) + "/" + id.Name}
}

// Validate reports what is wrong with the identity's parts.
func (id Identity) Validate() error {
	if err := ValidateCluster(id.Cluster); err != nil {
		return err
	}
	if id.Role != RoleNode && id.Role != RoleClient {
		return fmt.Errorf("role %q: want %q or %q", id.Role, RoleNode, RoleClient)
	}
	if !validName.MatchString(id.Name) {
		return fmt.Errorf("%s name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit (at most 128)", id.Role, id.Name)
	}
	if id.Role == RoleNode && (id.Tenant != "" || id.Admin) {
		return fmt.Errorf("node %q: a node belongs to no tenant and is no administrator (the cluster trusts it as a node)", id.Name)
	}
	if id.Tenant != "" {
		if err := ValidateTenant(id.Tenant); err != nil {
			return err
		}
	}
	return nil
}

// validName is a node's or client's name: what mesh accepts as a node name.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// validCluster is a SPIFFE trust domain, kept short.
var validCluster = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateCluster reports whether name can name a cluster (a SPIFFE trust
// domain): lower-case letters, digits, '.', '_' and '-', at most 63.
func ValidateCluster(name string) error {
	if !validCluster.MatchString(name) {
		return fmt.Errorf("cluster name %q: use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit (at most 63)", name)
	}
	return nil
}

// ParseIdentity parses a SPIFFE ID spiffe://<cluster>/<node|client>/<name>.
func ParseIdentity(s string) (Identity, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", s, err)
	}
	return identityFromURI(u)
}

func identityFromURI(u *url.URL) (Identity, error) {
	if u.Scheme != "spiffe" || u.Opaque != "" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.RawPath != "" {
		return Identity{}, fmt.Errorf("identity %q: want spiffe://<cluster>/<node|client>/<name>", u)
	}
	role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	id := Identity{Cluster: u.Host, Role: Role(role), Name: name}
	if !ok || !strings.HasPrefix(u.Path, "/") {
		return Identity{}, fmt.Errorf("identity %q: want spiffe://<cluster>/<node|client>/<name>", u)
	}
	if err := id.Validate(); err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", u, err)
	}
	return id, nil
}

// certIdentity is the SPIFFE ID of a leaf certificate: its only URI SAN.
func certIdentity(c *x509.Certificate) (Identity, error) {
	if c.IsCA {
		return Identity{}, fmt.Errorf("certificate %q is a CA certificate, not a node's or client's", c.Subject.CommonName)
	}
	switch len(c.URIs) {
	case 0:
		return Identity{}, fmt.Errorf("certificate %q names no feedmesh identity (no URI SAN spiffe://<cluster>/<node|client>/<name>): make certificates with `feedmesh tls cert create`", c.Subject.CommonName)
	case 1:
	default:
		return Identity{}, fmt.Errorf("certificate %q has %d URI SANs: a feedmesh certificate has exactly one, its spiffe:// identity", c.Subject.CommonName, len(c.URIs))
	}
	id, err := identityFromURI(c.URIs[0])
	if err != nil {
		return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
	}
	if id.Role == RoleClient {
		for _, ou := range c.Subject.OrganizationalUnit {
			switch t, isTenant := strings.CutPrefix(ou, TenantUnitPrefix); {
			case ou == AdminUnit:
				id.Admin = true
			case isTenant:
				if id.Tenant != "" {
					return Identity{}, fmt.Errorf("certificate %q names two tenants (%q and %q): a client belongs to one", c.Subject.CommonName, id.Tenant, t)
				}
				if err := ValidateTenant(t); err != nil {
					return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
				}
				id.Tenant = t
			}
		}
	}
	return id, nil
}

// caCluster is the cluster a CA certificate records: the host of its URI
// SAN spiffe://<cluster> (no path).
func caCluster(c *x509.Certificate) (string, error) {
	for _, u := range c.URIs {
		if u.Scheme == "spiffe" && (u.Path == "" || u.Path == "/") && u.User == nil && u.Port() == "" {
			if err := ValidateCluster(u.Host); err != nil {
				return "", fmt.Errorf("CA certificate %q: %w", c.Subject.CommonName, err)
			}
			return u.Host, nil
		}
	}
	return "", fmt.Errorf("CA certificate %q names no cluster (no URI SAN spiffe://<cluster>): create the CA with `feedmesh tls ca create --cluster NAME`, or add that URI SAN to yours", c.Subject.CommonName)
}

// chainsIdentity is the identity of the leaf of verified chains: its SPIFFE
// ID, whose cluster must be the one the chain's root CA records.
func chainsIdentity(chains [][]*x509.Certificate) (Identity, error) {
	id, _, err := identityChain(chains)
	return id, err
}

// identityChain is chainsIdentity, with the first chain whose root CA is
// of the identity's cluster.
func identityChain(chains [][]*x509.Certificate) (Identity, []*x509.Certificate, error) {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return Identity{}, nil, errors.New("certificate not verified")
	}
	id, err := certIdentity(chains[0][0])
	if err != nil {
		return Identity{}, nil, err
	}
	var roots []string
	for _, ch := range chains {
		c, err := caCluster(ch[len(ch)-1])
		if err != nil {
			return Identity{}, nil, err
		}
		if c == id.Cluster {
			return id, ch, nil
		}
		roots = append(roots, c)
	}
	return Identity{}, nil, fmt.Errorf("certificate of %s is signed by the CA of cluster %s, not of cluster %q", id, strings.Join(roots, ", "), id.Cluster)
}

// PeerIdentity returns who the peer of c proved to be with its certificate
// under mutual TLS. c is a stream of this package (*Stream: what
// Transport.Dial returns, what the kinds' listeners accept and what an
// RPCServer serves; raftnode's Raft connections are such streams), on either
// end of the connection: a node sees a node or a client dialling it, a
// dialling side sees the node it reached.
//
// ok is false for an unauthenticated peer: in dev mode (DevTLS, and
// ClientTLS without a CA) nothing is verified, and c may be any net.Conn
// that is not a stream of this package. Under mutual TLS every peer is
// authenticated (the handshake refuses the others), so authorization may
// treat !ok as "dev mode": allowed on a trusted network, or refused.
//
// The identity is worked out once per connection (on a dialled connection
// by verifying the server's chain again against the dialling config's
// RootCAs) and kept until the connection closes.
func PeerIdentity(c net.Conn) (Identity, bool) {
	s, ok := c.(*Stream)
	if !ok || s == nil {
		return Identity{}, false
	}
	return s.Peer()
}

// Peer is PeerIdentity of the stream.
func (s *Stream) Peer() (Identity, bool) {
	return connIdentity(s.conn, s.t.clientTLS.RootCAs)
}

// LocalIdentity is the identity this transport's own certificate proves
// under mutual TLS (MutualTLS's self, ClientTLS's certificate); ok is false
// in dev mode or without a certificate.
func (t *Transport) LocalIdentity() (Identity, bool) {
	c := t.clientTLS
	if c.RootCAs == nil || len(c.Certificates) == 0 {
		return Identity{}, false
	}
	certs, err := parseChain(c.Certificates[0])
	if err != nil {
		return Identity{}, false
	}
	chains, err := verifyPeerChain(certs, c.RootCAs)
	if err != nil {
		return Identity{}, false
	}
	id, err := chainsIdentity(chains)
	return id, err == nil
}

// peerKey is the context key of the stream an RPC handler serves.
type peerKey struct{}

// PeerFromContext returns the identity of the peer whose request an RPC
// handler serves (RPCServer puts the stream in the handler's context), as
// PeerIdentity. A request a node forwards to the leader arrives from that
// node: the leader sees the node, not the client that called it.
func PeerFromContext(ctx context.Context) (Identity, bool) {
	c, _ := ctx.Value(peerKey{}).(net.Conn)
	if c == nil {
		return Identity{}, false
	}
	return PeerIdentity(c)
}

// withPeer gives a handler's context the stream it serves.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, peerKey{}, c)
}

// peerIdentities caches each live connection's identity (connIdentity).
var peerIdentities sync.Map // *quic.Conn → peerIdentity

type peerIdentity struct {
	id Identity
	ok bool
}

// connIdentity is the identity c's peer proved: from the chains Go verified
// (a server requiring client certificates), else by verifying the peer's
// certificates against roots (a dialling side, whose config skips Go's
// verification to skip the host name), else none.
func connIdentity(c *quic.Conn, roots *x509.CertPool) (Identity, bool) {
	if v, ok := peerIdentities.Load(c); ok {
		p := v.(peerIdentity)
		return p.id, p.ok
	}
	var p peerIdentity
	st := c.ConnectionState().TLS
	chains := st.VerifiedChains
	if len(chains) == 0 && roots != nil && len(st.PeerCertificates) > 0 {
		chains, _ = verifyPeerChain(st.PeerCertificates, roots)
	}
	if len(chains) > 0 {
		id, err := chainsIdentity(chains)
		p = peerIdentity{id: id, ok: err == nil}
	}
	if _, loaded := peerIdentities.LoadOrStore(c, p); !loaded {
		context.AfterFunc(c.Context(), func() { peerIdentities.Delete(c) })
	}
	return p.id, p.ok
}
