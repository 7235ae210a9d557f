package mesh

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
)

// A job's state as `feedmesh jobs` and the clients' heartbeats show it:
// running, finished or failed (fsm.JobView.State), with the reason a
// worker recorded through Raft when its task failed. Workers record the
// end of each task (reportTaskEnd): that is how the cluster knows an OFF
// or STATIC job has finished, and why a job failed.

func (n *Node) endTask(ctx context.Context, req api.EndTaskRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodEndTask, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewEndTaskOfJob(req.Job, req.JobID, req.Worker, req.Failure))
			return err
		})
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
