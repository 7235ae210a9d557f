package mesh

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/internal/worker"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// workerHost is the node as its worker sees it (worker.Host): the split
// RPCs and job lookups answered on the Raft leader, this node's replica of
// the cluster state, and its autocache.
type workerHost struct{ n *Node }

var _ worker.Host = workerHost{}

func (h workerHost) Lease(ctx context.Context, req api.LeaseRequest) (api.LeaseResponse, error) {
	return h.n.lease(ctx, req)
}

func (h workerHost) Finish(ctx context.Context, req api.FinishRequest) error {
	return h.n.finish(ctx, req)
}

func (h workerHost) Produce(ctx context.Context, req api.ProduceRequest) error {
	return h.n.produce(ctx, req)
}

func (h workerHost) HandBack(ctx context.Context, req api.HandBackRequest) error {
	return h.n.handBack(ctx, req)
}

func (h workerHost) JobGet(ctx context.Context, job string) (api.JobGetResponse, error) {
	return h.n.jobGet(ctx, api.JobRequest{Job: job})
}

func (h workerHost) LocalJob(job string) (worker.JobView, bool) {
	v, ok := h.n.raft.Job(job)
	if !ok {
		return worker.JobView{}, false
	}
	wv := worker.JobView{ID: v.ID, Consumers: len(v.Consumers), Detached: v.Detached}
	if v.Dynamic != nil {
		wv.Held = v.Dynamic.Held()[h.n.name]
	}
	return wv, true
}

func (h workerHost) JobCut(job string, id uint64) int { return h.n.raft.JobCut(job, id) }

func (h workerHost) EndTask(ctx context.Context, req api.EndTaskRequest) error {
	return h.n.endTask(ctx, req)
}

func (h workerHost) Drained(ctx context.Context, req api.DrainedRequest) error {
	return h.n.drained(ctx, req)
}

func (h workerHost) TaskCache(ctx context.Context, job api.JobInfo, spec *pipeline.Spec) pipeline.Cache {
	return h.n.cache.taskCache(ctx, job, spec)
}

func (h workerHost) CacheHeld(job api.JobInfo, spec *pipeline.Spec) func() ranges.Set {
	return h.n.cache.held(job, spec)
}

// newWorker is the node's worker.
func (n *Node) newWorker() *worker.Worker {
	return worker.New(workerHost{n}, worker.Options{
		Name: n.name, Incarnation: n.incarnation, Config: n.cfg.Worker, RequestTimeout: n.cfg.RequestTimeout,
		Failover: failoverTime(n.cfg.Raft), Codec: n.codec, Log: n.log, Access: n.access,
		AccessFor: n.accessOfTenant,
	})
}

// failoverTime is about the longest a Raft leader's death leaves the
// cluster without one: a follower notices within 2 HeartbeatTimeouts
// (Raft randomizes the timeout between one and two), and an election
// whose first round fails (a vote refused by a peer that has not noticed
// yet, or split) is retried after an ElectionTimeout.
func failoverTime(r raftnode.Config) time.Duration {
	return 2*r.HeartbeatTimeout + r.ElectionTimeout
}

// Tasks lists the tasks running on this node.
func (n *Node) Tasks() []worker.TaskStats { return n.worker.Tasks() }

// ShareStats returns this node's sharing counters, for job only unless
// job is empty.
func (n *Node) ShareStats(job string) api.WorkerShareStats { return n.worker.ShareStats(job) }

// Work returns this node's work counters: what its pipelines produced.
func (n *Node) Work() worker.WorkCounters { return n.worker.Work() }

// OpStats returns the per-op statistics of this node's tasks, for job only
// unless job is empty (api.MethodOpStats).
func (n *Node) OpStats(job string) api.WorkerOpStats { return n.worker.OpStats(job) }

func (n *Node) WorkerOpStats(ctx context.Context, name, addr, job string) (api.WorkerOpStats, error) {
	if name == n.name {
		return n.OpStats(job), nil
	}
	if addr == "" {
		return api.WorkerOpStats{}, transport.Errorf(transport.ErrUnavailable, "no address for worker %s", name)
	}
	var st api.WorkerOpStats
	err := transport.Call(ctx, n.tr, n.codec, addr, api.MethodOpStats, api.OpStatsRequest{Job: job}, &st)
	return st, err
}

// StreamJob is the internal name of the job a data stream's Open names,
// for its peer (tenantnames.go): a tenant's short name qualified. A peer
// whose token does not check out, or a name it may not give, is refused.
func (h workerHost) StreamJob(conn net.Conn, open batch.OpenRequest) (string, error) {
	p, err := h.n.streamPrincipal(conn, open.Token)
	if err != nil {
		return "", err
	}
	job := h.n.resolveJobName(p, open.Job)
	if p.Admin && strings.HasPrefix(open.Job, "@") && !qualified(open.Job) {
		return "", fmt.Errorf("job %q: a name starting %q is \"@tenant/name\" (another tenant's job)", open.Job, "@")
	}
	if !p.Privileged() && reservedJobName(p, job) {
		return "", fmt.Errorf("permission denied: %s may not read job %q: names starting %q or %q are the cluster's", p.Name, open.Job, "@", "share~")
	}
	return job, nil
}

// StreamError is err as the peer of a data stream (conn) sees it: the
// internal names of its tenant's jobs short.
func (h workerHost) StreamError(conn net.Conn, token string, err error) error {
	p, perr := h.n.streamPrincipal(conn, token)
	if perr != nil {
		return err
	}
	return displayError(p, err)
}

func (h workerHost) MayRead(ctx context.Context, conn net.Conn, open batch.OpenRequest, job api.JobInfo) error {
	if err := h.n.mayRead(conn, open.Token, job); err != nil {
		return err
	}
	return h.n.checkCapability(ctx, job, open.Consumer, open.Capability)
}
