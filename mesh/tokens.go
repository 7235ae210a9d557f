package mesh

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"strings"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// Access tokens (docs/operating/security.md, "Tokens"). A token is
// "<id>.<secret>": the secret is 32 random bytes (base64url), chosen by
// the node the administrator asked, which answers it once; the leader
// records its SHA-256 (fsm.PutToken). A request carrying a token (the
// RPC header's, a data stream's Open) acts as the token's principal,
// "token:<id>" of its tenant, whatever certificate its connection has
// (a node's excepted: nodes act as nodes); a token that does not check
// out refuses the request. Any node checks a token against its own
// replica: one just created may be unknown for the moment a follower
// takes to apply it.

// tokenSecretBytes is a token secret's length, before encoding.
const tokenSecretBytes = 32

// tokenPrincipal is the principal token proves, by this node's replica.
func (n *Node) tokenPrincipal(token string) (api.Principal, error) {
	i := strings.LastIndexByte(token, '.')
	if i <= 0 || len(token) > 512 {
		return api.Principal{}, errBadToken
	}
	id, secret := token[:i], token[i+1:]
	t, ok := n.raft.Token(id)
	if !ok {
		return api.Principal{}, errBadToken
	}
	h := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(h[:], t.Hash) != 1 {
		return api.Principal{}, errBadToken
	}
	return api.Principal{Name: "token:" + id, Tenant: t.Tenant, Admin: t.Admin}, nil
}

// errBadToken answers a token that is unknown, revoked or wrong, alike.
var errBadToken = transport.Errorf(transport.ErrPermissionDenied, "the access token is unknown, revoked or wrong")

// tokenCreate makes a token on this node (its secret) and records its
// hash through the leader.
func (n *Node) tokenCreate(ctx context.Context, req api.TokenCreateRequest) (api.TokenCreateResponse, error) {
	if !fsm.ValidTokenID(req.ID) {
		return api.TokenCreateResponse{}, transport.Errorf(transport.ErrInvalid, "token id %q: use letters, digits, '.', '_' and '-' (at most 128)", req.ID)
	}
	if req.Tenant != "" {
		if err := transport.ValidateTenant(req.Tenant); err != nil {
			return api.TokenCreateResponse{}, transport.Errorf(transport.ErrInvalid, "%v", err)
		}
	}
	var secret string
	if !req.Forwarded {
		b := make([]byte, tokenSecretBytes)
		if _, err := rand.Read(b); err != nil {
			return api.TokenCreateResponse{}, err
		}
		secret = base64.RawURLEncoding.EncodeToString(b)
		h := sha256.Sum256([]byte(secret))
		req.Hash = h[:]
	}
	err := n.onLeader(ctx, req.Forwarded, api.MethodTokenCreate, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			if n.clusterProtocol() < fsm.ProtocolOwners {
				return transport.Errorf(transport.ErrInvalid, "tokens need every Raft server at protocol level %d or later", fsm.ProtocolOwners)
			}
			p := principal(ctx)
			_, err := n.raft.Apply(ctx, fsm.NewPutToken(req.ID, fsm.Token{Hash: req.Hash, Tenant: req.Tenant, Admin: req.Admin, CreatedBy: p.Name}))
			return mapTokenErr(err)
		})
	if err != nil {
		return api.TokenCreateResponse{}, err
	}
	return api.TokenCreateResponse{Token: req.ID + "." + secret}, nil
}

// tokenRevoke revokes a token through the leader.
func (n *Node) tokenRevoke(ctx context.Context, req api.TokenRevokeRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodTokenRevoke, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewDeleteToken(req.ID))
			return mapTokenErr(err)
		})
}

// mapTokenErr answers a refused token command as invalid, with the state
// machine's reason.
func mapTokenErr(err error) error {
	if err != nil && errorsIsRejected(err) {
		return transport.Errorf(transport.ErrInvalid, "%v", err)
	}
	return err
}

// mayRead decides whether the peer of a data stream (conn), with the
// token its Open carried, may read job (worker.Host): under mutual TLS a
// client of the job's tenant, an administrator, or a node; with a token,
// the token's principal. In dev mode without a token: anyone.
func (n *Node) mayRead(conn net.Conn, token string, job api.JobInfo) error {
	p, err := n.streamPrincipal(conn, token)
	if err != nil {
		return err
	}
	if !p.MayActOn(job.Tenant) {
		return fmt.Errorf("permission denied: %s may not read job %q: it is another tenant's", p.Name, displayJobName(p, job.Name))
	}
	return nil
}

// streamPrincipal is the principal of a data stream's peer (conn), with
// the token its Open carried: a node, a token's principal, a client
// certificate's, or in dev mode without a token the anonymous
// administrator.
func (n *Node) streamPrincipal(conn net.Conn, token string) (api.Principal, error) {
	id, authenticated := transport.PeerIdentity(conn)
	switch {
	case authenticated && id.IsNode():
		return identityPrincipal(id), nil
	case token != "":
		p, err := n.tokenPrincipal(token)
		if err != nil {
			return api.Principal{}, fmt.Errorf("permission denied: %w", err)
		}
		return p, nil
	case !authenticated:
		return anonymous, nil
	}
	return identityPrincipal(id), nil
}
