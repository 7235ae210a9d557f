package mesh

import (
	"context"
	"errors"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/transport"
)

// Permissions (docs/operating/security.md, "Tenants and permissions").
// The leader decides, from its state machine, before it proposes
// anything (checkRequest, called by onLeader):
//   - a request about a job (api.JobNamed: distribute and resume,
//     heartbeat, detach, job.get, receipts, offload, a consumer's local
//     worker's worker.* requests) is refused unless the job is the
//     principal's tenant's, or the principal is privileged (an
//     administrator, a node); a job that does not exist yet is the
//     creator's (its owner is recorded in the CreateJob);
//   - kv.put and kv.get are for the privileged only (adminOnly).
//
// The state machine checks a CreateJob's owner against the job's again
// (fsm.ErrPermission), so two tenants creating one name at once cannot
// both have it.

// checkRequest checks req (made by ctx's principal) on the leader.
// job.get checks its own (jobGet): another tenant's job is answered as a
// job that does not exist.
func (n *Node) checkRequest(ctx context.Context, method string, req any) error {
	p := principal(ctx)
	if p.Privileged() || method == api.MethodJobGet {
		return nil
	}
	j, ok := req.(api.JobNamed)
	if !ok {
		return nil
	}
	return n.checkJob(p, method, j.JobName())
}

// checkJob refuses p acting on job unless it is p's tenant's (or there
// is no such job), or on a share group.
func (n *Node) checkJob(p api.Principal, method, job string) error {
	if p.Privileged() {
		return nil
	}
	short := shortJobName(p.Tenant, job)
	if reservedJobName(p, job) {
		n.log.Warn("request refused: permission denied", "method", method, "principal", p.Name, "tenant", p.Tenant, "job", logString(job), "why", "a name reserved to the cluster")
		return errReservedName(method, p, job)
	}
	if t, ok := n.raft.JobTenant(job); !mayActOnJob(p, job, t, ok) {
		return n.denyJob(method, p, job)
	}
	// Roles grant jobs by the names the tenant gives them (short).
	if g := n.cfg.Policy.GrantsOf(p); !g.MayJob(short) {
		n.log.Warn("request refused: permission denied", "method", method, "principal", p.Name, "tenant", p.Tenant, "job", logString(job), "why", "no role grants the job's name")
		return transport.Errorf(transport.ErrPermissionDenied, "%s: job %q: the policy grants %s jobs named %s only (--policy)", method, job, p.Name, g.JobPatterns())
	}
	return nil
}

// accessOf is the data-access policy a request of p for job reads
// through: the node's, narrowed to the grants of p's tenant (--policy;
// the privileged: the node's). The leader lists a new dataset's files
// through it; every worker opens them through accessOfTenant, which
// narrows alike.
func (n *Node) accessOf(p api.Principal, job string) *objstore.Access {
	if p.Privileged() {
		if t, ok := n.raft.JobTenant(job); ok && t != "" {
			return n.accessOfTenant(t) // another tenant's job: read as its workers will
		}
		return n.access
	}
	return n.accessOfTenant(p.Tenant)
}

// accessOfTenant is the node's data-access policy narrowed to what
// tenant's roles grant (the node's when there is no policy, or the
// default tenant has no binding).
func (n *Node) accessOfTenant(tenant string) *objstore.Access {
	g, narrowed := n.cfg.Policy.DataGrantOf(tenant)
	if !narrowed {
		return n.access
	}
	return n.access.Narrow(g)
}

// mayActOnJob is the policy of a request about the job named job, of
// tenant (exists: whether there is such a job): the privileged act on
// any job; others on their tenant's, and on a name no job has (creating
// it makes it theirs), never on a share group's name (a share group is
// the cluster's: its workers are nodes, whatever the tenants of the jobs
// that share it). Pure: the policy's table test drives it.
func mayActOnJob(p api.Principal, job, tenant string, exists bool) bool {
	if p.Privileged() {
		return true
	}
	if reservedJobName(p, job) {
		return false
	}
	if t, qualified := nameTenant(job); qualified && t != p.Tenant {
		return false // another tenant's name, whether or not it has a job
	}
	return !exists || p.MayActOn(tenant)
}

// denyJob logs and answers a request refused because the job is another
// tenant's.
func (n *Node) denyJob(method string, p api.Principal, job string) error {
	n.log.Warn("request refused: permission denied", "method", method, "principal", p.Name, "tenant", p.Tenant, "job", logString(job), "why", "another tenant's job")
	return transport.Errorf(transport.ErrPermissionDenied, "%s: job %q is another tenant's", method, job)
}

// adminOnly is a method for the privileged only (administrators, nodes):
// the KV store, tokens.
func adminOnly[Req any](f func(context.Context, Req) (any, error)) func(context.Context, Req) (any, error) {
	return func(ctx context.Context, req Req) (any, error) {
		if p := principal(ctx); !p.Privileged() {
			return nil, transport.Errorf(transport.ErrPermissionDenied, "%s may not: an administrator's action", p.Name)
		}
		return f(ctx, req)
	}
}

// ownerOf is the owner a new job or dataset of p records.
func ownerOf(p api.Principal) fsm.Owner {
	return fsm.Owner{Principal: p.Name, Tenant: p.Tenant}
}

// jobOwner is the owner a CreateJob of p carries for job: p, or for an
// administrator acting on another tenant's existing job, that job's owner
// (the state machine refuses a CreateJob of another tenant than the
// job's).
func (n *Node) jobOwner(p api.Principal, job string) fsm.Owner {
	if v, ok := n.raft.Job(job); ok && p.Privileged() {
		if v.Owner != nil {
			return *v.Owner
		}
		return fsm.Owner{Principal: p.Name} // the default tenant's job
	}
	if t, ok := nameTenant(job); ok && p.Privileged() {
		// An administrator creating "@tenant/name": the tenant's job.
		return fsm.Owner{Principal: p.Name, Tenant: t}
	}
	return ownerOf(p)
}

// tenantsEnforced refuses a tenant's principal while the cluster is below
// protocol level ProtocolOwners (a rolling upgrade): a leader of an older
// release would neither record its jobs' owner nor check it. The default
// tenant's and the privileged go on, as before tenants. Cheap once the
// level is reached: this node's writing level first, the cluster's
// computed only while that is below.
func (n *Node) tenantsEnforced(p api.Principal) error {
	if p.Privileged() || p.Tenant == "" || n.raft.Protocol() >= fsm.ProtocolOwners || n.clusterProtocol() >= fsm.ProtocolOwners {
		return nil
	}
	return transport.Errorf(transport.ErrUnavailable, "%s of tenant %s: %v", p.Name, p.Tenant, errTenantsNeedProtocol)
}

// errTenantsNeedProtocol answers a tenant's job request while a server
// of an older release is in the cluster: jobs would not record their
// owner there.
var errTenantsNeedProtocol = errors.New("jobs of tenants need every Raft server at protocol level 3 or later; finish the upgrade first")

// Visibility: a worker asked for its counters (worker.sharestats,
// worker.opstats) answers a principal about its tenant's jobs only, as
// its own replica of the state knows their owners (a job it does not
// know yet is left out of a list; asked about by name, it answers what it
// has, nothing).

// visibleJob reports whether p may see job, by this node's replica.
func (n *Node) visibleJob(p api.Principal, job string) bool {
	if p.Privileged() {
		return true
	}
	if fsm.IsShareGroupName(job) {
		return false // the cluster's, no tenant's
	}
	t, ok := n.raft.JobTenant(job)
	return ok && t == p.Tenant
}

func (n *Node) shareStatsOf(ctx context.Context, req api.ShareStatsRequest) (any, error) {
	p := principal(ctx)
	if err := n.checkJob(p, api.MethodShareStats, req.Job); req.Job != "" && err != nil {
		return nil, err
	}
	st := n.ShareStats(req.Job)
	if !p.Privileged() {
		// The node-wide figures count every tenant's traffic: the
		// operator's (administrators, /metrics). A tenant gets its jobs'
		// counters only.
		st.Produced, st.Bytes, st.Windows = 0, 0, 0
		kept := st.Jobs[:0:0]
		for _, j := range st.Jobs {
			if n.visibleJob(p, j.Job) {
				kept = append(kept, j)
			}
		}
		st.Jobs = kept
	}
	return st, nil
}

func (n *Node) opStatsOf(ctx context.Context, req api.OpStatsRequest) (any, error) {
	p := principal(ctx)
	if err := n.checkJob(p, api.MethodOpStats, req.Job); req.Job != "" && err != nil {
		return nil, err
	}
	st := n.OpStats(req.Job)
	if !p.Privileged() {
		kept := st.Tasks[:0:0]
		for _, t := range st.Tasks {
			if n.visibleJob(p, t.Job) {
				kept = append(kept, t)
			}
		}
		st.Tasks = kept
	}
	return st, nil
}
