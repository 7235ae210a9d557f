package mesh

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/transport"
)

// registerHandlers answers the wire API's control methods (api/methods.go)
// on this node's RPC server. Most are answered on the Raft leader: the
// method forwards its request there (onLeader).
func (n *Node) registerHandlers() {
	n.rpc.Handle(api.MethodMembers, func(context.Context, func(any) error) (any, error) { return n.Members(), nil })
	n.rpc.Handle(api.MethodStatus, func(context.Context, func(any) error) (any, error) { return n.Status(), nil })
	handle(n, api.MethodPut, adminOnly(noReservedKey(func(r api.PutRequest) string { return r.Key }, answer(n.put))))
	handle(n, api.MethodGet, adminOnly(noReservedKey(func(r api.GetRequest) string { return r.Key }, answer(n.get))))

	handle(n, api.MethodDistribute, answer(n.distribute))
	handle(n, api.MethodHeartbeat, answer(n.heartbeat))
	handle(n, api.MethodDetach, done(n.detach))
	handle(n, api.MethodJobs, func(ctx context.Context, req api.JobRequest) (any, error) { return n.jobs(ctx, req.Forwarded) })
	handle(n, api.MethodJobGet, answer(n.jobGet))
	handle(n, api.MethodReceipts, done(n.receipts))
	handle(n, api.MethodOffload, done(n.offload))

	handle(n, api.MethodLease, answer(n.lease))
	handle(n, api.MethodFinish, done(n.finish))
	handle(n, api.MethodProduce, done(n.produce))
	handle(n, api.MethodHandBack, done(n.handBack))
	handle(n, api.MethodDrained, done(n.drained))
	handle(n, api.MethodEndTask, done(n.endTask))

	handle(n, api.MethodShareStats, n.shareStatsOf)
	handle(n, api.MethodOpStats, n.opStatsOf)
	handle(n, api.MethodProbe, n.probe)
	handle(n, api.MethodCacheHeld, nodesOnly(answer(n.cacheHeld)))
	handle(n, api.MethodCapabilityCheck, nodesOnly(func(ctx context.Context, req api.CapabilityCheckRequest) (any, error) {
		var resp api.CapabilityCheckResponse
		return resp, n.capabilityCheck(ctx, req, &resp)
	}))
	handle(n, api.MethodTokenCreate, adminOnly(answer(n.tokenCreate)))
	handle(n, api.MethodTokenRevoke, adminOnly(done(n.tokenRevoke)))
}

// handle registers method, whose request decodes into a Req, answered by
// serve. Every method decodes the same way: a request that does not decode is
// refused as invalid, naming the method.
func handle[Req any](n *Node, method string, serve func(context.Context, Req) (any, error)) {
	n.rpc.Handle(method, func(ctx context.Context, decode func(any) error) (any, error) {
		var req Req
		if err := decode(&req); err != nil {
			return nil, transport.Errorf(transport.ErrInvalid, "decode %s: %v", method, err)
		}
		if err := n.authorize(ctx, method, req); err != nil {
			return nil, err
		}
		p, err := n.principalOf(ctx, req)
		if err != nil {
			return nil, err
		}
		if err := n.tenantsEnforced(p); err != nil {
			return nil, err
		}
		if fw, ok := any(req).(api.Forwardable); ok && fw.WasForwarded() {
			return serve(withPrincipal(ctx, p), req) // its job's internal name, from the node that took it
		}
		// Where the request enters the cluster: its job's internal name
		// for p in, the names p knows out (tenantnames.go).
		if req, err = qualifyRequest(p, method, req, n.resolveJobName); err != nil {
			return nil, err
		}
		resp, err := serve(withPrincipal(ctx, p), req)
		return displayAnswer(p, resp), displayError(p, err)
	})
}

// authorize checks the caller of a request against what it asks (issue
// 36). Under mutual TLS every caller is a node or a client of the cluster
// (its certificate says which, and its name):
//   - a forwarded request comes from a node only: the node that forwarded
//     it checked its caller, and the leader trusts that check;
//   - a worker's request (lease, finish, produce, hand back, drained, end
//     of task) names its worker: a node acts only in its own name; a
//     consumer's local worker (jobspec.LocalWorkerOf) may be any
//     authenticated caller here; the leader lets only the job's tenant
//     make it (tenancy.go).
//
// Then the request's principal is worked out (principal.go: its
// certificate, its access token, or the forwarding node's word) and kept
// in the handler's context; the leader checks it against the job the
// request concerns (tenancy.go).
//
// Refusals answer transport.ErrPermissionDenied and are logged, rate
// limited per cause. Without identities (dev mode on loopback, or
// --insecure) nobody proves who it is and nothing is checked here.
func (n *Node) authorize(ctx context.Context, method string, req any) error {
	id, ok := transport.PeerFromContext(ctx)
	if !ok {
		return nil
	}
	if f, ok := req.(api.Forwardable); ok && f.WasForwarded() {
		if !id.IsNode() {
			return n.deny(method, id, "only a node forwards a request to the leader")
		}
		return nil // the forwarding node checked its caller
	}
	w, ok := req.(api.WorkerRequest)
	if !ok {
		return nil
	}
	name := w.WorkerName()
	if _, local := jobspec.LocalWorkerOf(name); local {
		return nil
	}
	if !id.IsNode() || id.Name != name {
		return n.deny(method, id, fmt.Sprintf("a worker request in the name of node %q: only that node may make it", name))
	}
	return nil
}

// deny logs and answers a refused request.
func (n *Node) deny(method string, id transport.Identity, why string) error {
	n.log.Warn("request refused: permission denied", "method", method, "caller", id.String(), "why", why)
	return transport.Errorf(transport.ErrPermissionDenied, "%s: %s may not: %s", method, id, why)
}

// nodesOnly is a method only nodes call (worker to worker): refused to a
// client under mutual TLS.
func nodesOnly[Req any](f func(context.Context, Req) (any, error)) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) {
		if id, ok := transport.PeerFromContext(ctx); ok && !id.IsNode() {
			return nil, transport.Errorf(transport.ErrPermissionDenied, "%s may not: only nodes ask each other this (what they cache, whether a stream's capability checks out)", id)
		}
		return f(ctx, req)
	}
}

// answer is a method that answers with a Resp.
func answer[Req, Resp any](f func(context.Context, Req) (Resp, error)) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) { return f(ctx, req) }
}

// done is a method whose answer says only that it was done.
func done[Req any](f func(context.Context, Req) error) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) { return struct{}{}, f(ctx, req) }
}
