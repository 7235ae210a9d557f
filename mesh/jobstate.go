package mesh

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// A job's state as `feedmesh jobs` and the clients' heartbeats show it:
// running, finished or failed (fsm.JobView.State), with the reason a
// worker recorded through Raft when its task failed. Workers record the
// end of each task (reportTaskEnd): that is how the cluster knows an OFF
// or STATIC job has finished, and why a job failed.

func (n *Node) registerJobStateHandlers(handle func(string, func(context.Context, func(any) error) (any, error))) {
	handle(api.MethodEndTask, func(ctx context.Context, decode func(any) error) (any, error) {
		var req api.EndTaskRequest
		if err := decode(&req); err != nil {
			return nil, transport.Errorf(transport.ErrInvalid, "decode endtask: %v", err)
		}
		return struct{}{}, n.endTask(ctx, req)
	})
}

func (n *Node) endTask(ctx context.Context, req api.EndTaskRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodEndTask, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewEndTaskOfJob(req.Job, req.JobID, req.Worker, req.Failure))
			return err
		})
}

// reportTaskEnd records in Raft that this worker's task of job ended,
// failed with taskErr if not nil. The task's consumers already know (the
// end of their streams says it, error included); this is for everyone else
// (`feedmesh jobs`, consumers that come later), so a report that cannot
// be made (no leader for a whole RequestTimeout) is logged, not retried.
func (n *Node) reportTaskEnd(job string, jobID uint64, taskErr error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
	defer cancel()
	req := api.EndTaskRequest{Job: job, Worker: n.name, JobID: jobID}
	if taskErr != nil {
		req.Failure = taskErr.Error()
	}
	if err := n.endTask(ctx, req); err != nil && ctx.Err() == nil {
		n.log.Warn("record the end of a task", "job", job, "failed", taskErr != nil, "err", err)
	}
}

// jobState is v's state and, when it failed, why.
func jobState(v fsm.JobView) (state, failure string) {
	switch v.State() {
	case fsm.JobFailed:
		return api.JobFailed, fmt.Sprintf("worker %s: %s", v.Failure.Worker, v.Failure.Reason)
	case fsm.JobFinished:
		return api.JobFinished, ""
	default:
		return api.JobRunning, ""
	}
}
