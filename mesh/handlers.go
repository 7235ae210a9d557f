package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// registerHandlers answers the wire API's control methods (api/methods.go)
// on this node's RPC server. Most are answered on the Raft leader: the
// method forwards its request there (onLeader).
func (n *Node) registerHandlers() {
	n.rpc.Handle(api.MethodMembers, func(context.Context, func(any) error) (any, error) { return n.Members(), nil })
	n.rpc.Handle(api.MethodStatus, func(context.Context, func(any) error) (any, error) { return n.Status(), nil })
	handle(n, api.MethodPut, answer(n.put))
	handle(n, api.MethodGet, answer(n.get))

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

	handle(n, api.MethodShareStats, func(_ context.Context, req api.ShareStatsRequest) (any, error) { return n.ShareStats(req.Job), nil })
	handle(n, api.MethodOpStats, func(_ context.Context, req api.OpStatsRequest) (any, error) { return n.OpStats(req.Job), nil })
	handle(n, api.MethodProbe, n.probe)
	handle(n, api.MethodCacheHeld, answer(n.cacheHeld))
}

// handle registers method, whose request decodes into a Req, answered by
// f. Every method decodes the same way: a request that does not decode is
// refused as invalid, naming the method.
func handle[Req any](n *Node, method string, f func(context.Context, Req) (any, error)) {
	n.rpc.Handle(method, func(ctx context.Context, decode func(any) error) (any, error) {
		var req Req
		if err := decode(&req); err != nil {
			return nil, transport.Errorf(transport.ErrInvalid, "decode %s: %v", method, err)
		}
		return f(ctx, req)
	})
}

// answer is a method that answers with a Resp.
func answer[Req, Resp any](f func(context.Context, Req) (Resp, error)) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) { return f(ctx, req) }
}

// done is a method whose answer says only that it was done.
func done[Req any](f func(context.Context, Req) error) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) { return struct{}{}, f(ctx, req) }
}
