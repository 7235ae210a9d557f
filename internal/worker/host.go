package worker

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Host is the node a Worker runs on, as the worker sees it: the control
// plane (Control: answered through Raft on the leader), a job's lookup,
// the node's replica of the cluster state when it has one, and its
// autocache. The node implements it; the worker reaches nothing else of
// it.
type Host interface {
	Control
	// JobGet looks a job up on the leader.
	JobGet(ctx context.Context, job string) (api.JobGetResponse, error)
	// LocalJob reads a job from the node's own replica of the cluster
	// state, asking no other node (false: it holds none, or not the job).
	LocalJob(job string) (JobView, bool)
	// JobCut is the cut of the job of that name and id (0: any) in the
	// node's replica (0: none, or no replica): a cut set while the job
	// runs shows there before a lease says so. Cheap: asked per split.
	JobCut(job string, id uint64) int
	// EndTask records that a task's data ended, or that it failed.
	EndTask(ctx context.Context, req api.EndTaskRequest) error
	// Drained records that this process drained its task of a job: its
	// next process rejoins the job.
	Drained(ctx context.Context, req api.DrainedRequest) error
	// TaskCache is the autocache of the pipeline a task of job opens now
	// (nil: the spec has no autocache op, or the node caches nothing).
	TaskCache(ctx context.Context, job api.JobInfo, spec *pipeline.Spec) pipeline.Cache
	// CacheHeld returns what a task's leases tell the leader the node
	// holds of job's cached splits (nil: nothing it could read).
	CacheHeld(job api.JobInfo, spec *pipeline.Spec) func() ranges.Set
	// MayRead refuses a data stream of job to its peer (conn), with the
	// Open it sent (its access token, consumer and capability), unless
	// the node's policy lets it read the job (its tenant's, and the
	// consumer's capability). Its error never holds the capability.
	MayRead(ctx context.Context, conn net.Conn, open batch.OpenRequest, job api.JobInfo) error
	// StreamJob is the name the worker knows the job a data stream's
	// Open names by, for the stream's peer (conn): job names are per
	// tenant, and a tenant's client gives its job's short name. An error
	// (the peer's token does not check out, a name it may not give)
	// refuses the stream.
	StreamJob(conn net.Conn, open batch.OpenRequest) (string, error)
	// StreamError is err, which ends a data stream of the peer of conn
	// (its Open carried token), as the peer sees it (its job's name as
	// it gave it).
	StreamError(conn net.Conn, token string, err error) error
}

// JobView is what a worker reads of a job from its node's replica of the
// cluster state.
type JobView struct {
	ID        uint64
	Consumers int
	// Held is how many splits this worker holds (exactly-once: produced,
	// not yet settled).
	Held int
	// Detached are the consumers detached from their streams (coordinated
	// reads), with the round each detached at.
	Detached map[string]int64
}

// Options are the worker's identity and its node's settings.
type Options struct {
	// Name is the node's name: what its tasks lease under.
	Name string
	// Incarnation is the node's process incarnation.
	Incarnation uint64
	// Config bounds what the worker does.
	Config Config
	// RequestTimeout bounds each control request a task makes.
	RequestTimeout time.Duration
	// Failover is about the longest a Raft leader's death leaves the
	// cluster without one (Config.FailoverAhead's default).
	Failover time.Duration
	// Codec frames the data streams.
	Codec *transport.Codec
	// Log receives the worker's logs.
	Log *slog.Logger
	// Access is the node's data-access policy: every job's spec is bound
	// to it (pipeline.Spec.Bind) before its splits are listed or read.
	// nil reads as the process may (objstore.Local): tests only.
	Access *objstore.Access
	// AccessFor, if set, is the policy a job of tenant reads through: the
	// node's, narrowed to what the tenant's roles grant (mesh's
	// --policy). nil: Access for every job.
	AccessFor func(tenant string) *objstore.Access
}
