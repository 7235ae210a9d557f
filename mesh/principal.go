package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// Principals (docs/operating/security.md, "Tenants and permissions").
//
// Every request a node answers has a principal, worked out once, where
// the request enters the cluster (principalOf), and kept in the handler's
// context (withPrincipal):
//   - in dev mode nobody proves who it is: one anonymous principal, an
//     administrator (everything is allowed, as before tenants);
//   - under mutual TLS, a client certificate's SPIFFE ID with the tenant
//     and administrator's unit it carries (transport.Identity), or a node
//     of the cluster (privileged: it runs the jobs' workers and forwards
//     its callers' requests);
//   - a request carrying an access token: the token's principal
//     (tokens.go), under mutual TLS or not;
//   - a request a node forwarded to the leader: the principal that node
//     took it from (api.Forwardable's Caller), trusted because only a
//     node may forward (authorize). A node of an older release forwards no
//     principal: its callers count as the default tenant, never as
//     administrators.
//
// A node forwarding a request (onLeader) puts its context's principal in
// it. A call made in process (a Node method called by the program that
// runs the node, tests among them) has no principal in its context: the
// node's operator, an administrator.

type principalKey struct{}

// anonymous is dev mode's one principal, and the in-process caller's.
var anonymous = api.Principal{Name: "anonymous", Admin: true}

// withPrincipal is ctx carrying p.
func withPrincipal(ctx context.Context, p api.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principal is the principal of the request ctx serves.
func principal(ctx context.Context) api.Principal {
	if p, ok := ctx.Value(principalKey{}).(api.Principal); ok {
		return p
	}
	return anonymous
}

// principalOf works out the principal of req, which the peer of ctx sent
// (authorize has checked that only a node sends a forwarded request),
// with the access token it carried if any (tokens.go).
func (n *Node) principalOf(ctx context.Context, req any) (api.Principal, error) {
	id, ok := transport.PeerFromContext(ctx)
	if f, fwd := req.(api.Forwardable); fwd && f.WasForwarded() && (!ok || id.IsNode()) {
		// In dev mode anyone may claim any principal, as anyone may send
		// no token and be the anonymous administrator: the claim costs
		// nothing, and keeps a token's principal across the forward.
		switch p := f.ForwardedFor(); {
		case p != nil:
			return *p, nil
		case !ok:
			return anonymous, nil
		}
		return api.Principal{Name: "unknown (forwarded by " + id.String() + ")"}, nil
	}
	if ok && id.IsNode() {
		return identityPrincipal(id), nil // a node acts as a node, whatever token it sends
	}
	if token, has := transport.TokenFromContext(ctx); has {
		return n.tokenPrincipal(token)
	}
	if !ok {
		return anonymous, nil
	}
	return identityPrincipal(id), nil
}

// identityPrincipal is the principal a certificate proves.
func identityPrincipal(id transport.Identity) api.Principal {
	if id.IsNode() {
		return api.Principal{Name: id.String(), Node: true}
	}
	return api.Principal{Name: id.String(), Tenant: id.Tenant, Admin: id.Admin}
}
