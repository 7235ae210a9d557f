package api

import "github.com/feedmesh/feedmesh/transport"

// Control methods of a node. Members, Status and ShareStats are answered
// by the node asked; every other one by the Raft leader (any node
// forwards it).
const (
	MethodMembers = "members"   // → []Member, as the node's gossip sees them
	MethodStatus  = "status"    // → Status, the node's view of the Raft group
	MethodPut     = "kv.put"    // PutRequest → PutResponse
	MethodGet     = "kv.get"    // GetRequest → GetResponse
	MethodJobs    = "jobs.list" // JobRequest{} → []JobInfo

	MethodDistribute = "job.distribute"  // DistributeRequest → JobInfo: register the dataset, create or join the job, attach a consumer
	MethodHeartbeat  = "job.heartbeat"   // JobRequest → JobInfo: renew a consumer's lease and learn the job's workers
	MethodDetach     = "job.detach"      // JobRequest: a consumer leaves
	MethodJobGet     = "job.get"         // JobRequest → JobGetResponse: a job and its dataset spec (workers use it)
	MethodLease      = "worker.lease"    // LeaseRequest → LeaseResponse: DYNAMIC split leases
	MethodFinish     = "worker.finish"   // FinishRequest: DYNAMIC splits read completely
	MethodEndTask    = "worker.endtask"  // EndTaskRequest: a worker's task of the job ended, or failed
	MethodProduce    = "worker.produce"  // ProduceRequest: exactly-once splits whose elements were all emitted
	MethodHandBack   = "worker.handback" // HandBackRequest: a draining worker's unstarted DYNAMIC splits
	MethodDrained    = "worker.drained"  // DrainedRequest: a worker drained its task (it holds nothing of the job)
	MethodReceipts   = "job.receipts"    // ReceiptsRequest: a consumer's receipts and fences (exactly-once)

	// MethodShareStats (ShareStatsRequest → WorkerShareStats) is answered
	// by the worker asked, never forwarded: its own sharing counters.
	MethodShareStats = "worker.sharestats"
	// MethodOpStats (OpStatsRequest → WorkerOpStats) is answered by the
	// worker asked, never forwarded: the per-op statistics of its tasks'
	// pipelines (`feedmesh diagnose --job`, the status page).
	MethodOpStats = "worker.opstats"
)

// ErrNotAssigned is the answer to a lease from a worker the job no longer
// counts on (it was declared dead and expired, perhaps wrongly): that
// worker's part of the job is over for good, as its consumers dropped it.
// It crosses the wire by its code.
var ErrNotAssigned = &transport.Error{Code: "not_assigned"}

// ErrHandBackRefused answers a draining worker's hand-back that the leader
// refused, changing nothing (no other worker would take the splits): the
// worker reads them itself. Any other failure leaves the outcome unknown.
var ErrHandBackRefused = &transport.Error{Code: "handback_refused"}

// ErrDismissed answers a lease from a worker its autoscaling job gave back
// (fsm.ErrDismissed): it hands back what it has not started, reads
// the split in progress and drains, as in a graceful shutdown.
var ErrDismissed = &transport.Error{Code: "released"}

// ErrQuota answers a request that would take a tenant past one of its
// limits (a job, a dataset, bytes of replicated state) or into the share
// of the cluster's limits kept for administrators
// (docs/operating/security.md, "Quotas and cleanup"). Retrying does not
// help until the tenant's jobs end or are removed.
var ErrQuota = &transport.Error{Code: "quota_exceeded"}
