package mesh

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/mesh/api"
	"github.com/feedmesh/feedmesh/raftstate"
	"github.com/feedmesh/feedmesh/transport"
)

// A job's state as `feedmesh jobs` and the clients' heartbeats show it:
// running, finished (DYNAMIC: every split handed out and each finished or
// lost), or failed, with the reason a worker recorded through Raft when
// its pipeline failed (reportFailure).

func (n *Node) registerJobStateHandlers(handle func(string, func(context.Context, func(any) error) (any, error))) {
	handle(api.MethodFail, func(ctx context.Context, decode func(any) error) (any, error) {
		var req api.FailRequest
		if err := decode(&req); err != nil {
			return nil, transport.Errorf(transport.ErrInvalid, "decode fail: %v", err)
		}
		return struct{}{}, n.fail(ctx, req)
	})
}

func (n *Node) fail(ctx context.Context, req api.FailRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodFail, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, raftstate.NewFailJob(req.Job, req.Worker, req.Reason))
			return err
		})
}

// reportFailure records in Raft that this worker's task of job failed
// with err. The task's consumers already get the error at the end of their
// streams; this is for everyone else (`feedmesh jobs`, consumers that
// attach later), so a failure that cannot be recorded (no leader for a
// whole RequestTimeout) is logged, not retried.
func (n *Node) reportFailure(job string, err error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
	defer cancel()
	req := api.FailRequest{Job: job, Worker: n.name, Reason: err.Error()}
	if ferr := n.fail(ctx, req); ferr != nil && ctx.Err() == nil {
		n.log.Warn("record the job's failure", "job", job, "err", ferr)
	}
}

// jobState is v's state and, when it failed, why.
func jobState(v raftstate.JobView) (state, failure string) {
	switch {
	case v.Failure != nil:
		return api.JobFailed, fmt.Sprintf("worker %s: %s", v.Failure.Worker, v.Failure.Reason)
	case v.Progress != nil && v.Progress.Complete:
		return api.JobFinished, ""
	default:
		return api.JobRunning, ""
	}
}
