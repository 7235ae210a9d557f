package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// The status snapshot over HTTP (mesh/observe) has no TLS identity to go
// by: its caller proves who it is with an access token (Authorization:
// Bearer), as on the RPC (tokens.go). In dev mode (no mutual TLS) anyone
// may send none and be the anonymous administrator, as on the RPC.

// ErrTokenRequired answers an HTTP status request without a token on a
// node under mutual TLS.
var ErrTokenRequired = transport.Errorf(transport.ErrPermissionDenied,
	"an access token is required (Authorization: Bearer <token>; `feedmesh token create`): the node runs under mutual TLS")

// HTTPPrincipal is the principal an HTTP request carrying token ("" for
// none) acts as: the token's, the anonymous administrator in dev mode, or
// ErrTokenRequired.
func (n *Node) HTTPPrincipal(token string) (api.Principal, error) {
	if token != "" {
		return n.tokenPrincipal(token)
	}
	if n.mtls == nil {
		return anonymous, nil
	}
	return api.Principal{}, ErrTokenRequired
}

// JobsAs lists the jobs p may see (its tenant's; an administrator's or a
// node's: every tenant's), as the leader knows them, named as p names
// them (its tenant's by their short names: tenantnames.go).
func (n *Node) JobsAs(ctx context.Context, p api.Principal) ([]api.JobInfo, error) {
	js, err := n.jobs(withPrincipal(ctx, p), false)
	return displayJobInfos(p, js), displayError(p, err)
}

// LocalJobsAs is LocalJobs limited to what p may see.
func (n *Node) LocalJobsAs(p api.Principal) []api.JobInfo {
	var out []api.JobInfo
	for _, j := range n.LocalJobs() {
		if p.MayActOn(j.Tenant) {
			out = append(out, displayJobInfo(p, j))
		}
	}
	return out
}
