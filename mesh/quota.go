package mesh

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// Quotas and cleanup (docs/operating/security.md, "Quotas and cleanup").

// growth is what a request would add to a tenant's share of the state.
type growth struct {
	// job: a new job asking for up to workers nodes (0: every node).
	job     bool
	workers int
	// dataset: a new dataset of specBytes.
	dataset   bool
	specBytes int
	// consumer: a consumer attaching.
	consumer bool
}

// quotaLedger holds, on the leader, what the requests it has let past
// their quota check and not yet seen applied will add (issue 37: the
// check read the state machine's usage and proposed later, so 60
// concurrent distributes of one tenant at --tenant-max-jobs 3 all
// passed). reserveQuota checks usage plus these reservations and adds
// its own under one lock; the request releases it once its commands are
// applied (or refused), when the state machine's usage counts them. In
// between a request is counted twice, so a request racing another's
// release may be refused at the boundary: conservative, never over.
//
// Sound across leader changes: a leader checks against its applied
// state only after a Barrier of its term (the term is recorded when the
// Barrier returns), so every entry a former leader committed, or that
// this leader's log holds from it and commits, is applied and counted
// first; an entry of a former leader that this leader's log does not
// hold never commits. A deposed leader still taking requests cannot
// commit what it proposes (its term is over), and its reservations die
// with its requests. A request that stopped waiting for its commands
// (its context done) may leave one to be applied after its release: the
// next check then runs a Barrier first, as after a change of leader.
type quotaLedger struct {
	mu      sync.Mutex
	term    uint64 // the term whose Barrier this leader has applied
	pending map[string]*reserved
	all     reserved // every tenant's, for the administrators' reserve
}

// reserved is what requests in flight will add to a tenant's usage.
type reserved struct {
	jobs, datasets, consumers int
	specBytes                 int64
}

func (r *reserved) add(g growth, sign int) {
	if g.job {
		r.jobs += sign
	}
	if g.dataset {
		r.datasets += sign
		r.specBytes += int64(sign * g.specBytes)
	}
	if g.consumer {
		r.consumers += sign
	}
}

// reserveQuota refuses p what g adds past its tenant's limits
// (Config.Tenants) or into the slots kept for administrators
// (overQuota decides), counting what requests in flight have reserved
// (quotaLedger); if it does not refuse, it reserves g until the caller
// calls release, which it must once the commands that add g are applied
// or refused.
func (n *Node) reserveQuota(ctx context.Context, p api.Principal, job string, g growth) (release func(), err error) {
	if p.Privileged() || (!g.job && !g.dataset && !g.consumer) {
		return func() {}, nil
	}
	q := &n.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if term := n.raft.Term(); term != q.term {
		if err := n.raft.Barrier(ctx); err != nil {
			return nil, err
		}
		q.term = term
	}
	u := n.raft.TenantUsage(p.Tenant)
	if r := q.pending[p.Tenant]; r != nil {
		u.Jobs += r.jobs
		u.Datasets += r.datasets
		u.Consumers += r.consumers
		u.SpecBytes += r.specBytes
	}
	u.AllJobs += q.all.jobs
	u.AllDatasets += q.all.datasets
	if why := overQuota(n.cfg.Tenants, p, u, g); why != "" {
		tenant := p.Tenant
		if tenant == "" {
			tenant = "(default)"
		}
		n.log.Warn("request refused: quota", "principal", p.Name, "tenant", p.Tenant, "job", logString(job), "jobs", u.Jobs, "datasets", u.Datasets, "consumers", u.Consumers, "spec_bytes", u.SpecBytes)
		return nil, transport.Errorf(api.ErrQuota, "job %q: tenant %s: %s", job, tenant, why)
	}
	if q.pending == nil {
		q.pending = make(map[string]*reserved)
	}
	r := q.pending[p.Tenant]
	if r == nil {
		r = &reserved{}
		q.pending[p.Tenant] = r
	}
	r.add(g, 1)
	q.all.add(g, 1)
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			r.add(g, -1)
			q.all.add(g, -1)
			if *r == (reserved{}) {
				delete(q.pending, p.Tenant)
			}
			if ctx.Err() != nil {
				// The request stopped waiting (deadline, client gone):
				// a command it proposed may still be applied. The next
				// check waits for it (a Barrier) before counting.
				q.term = 0
			}
		})
	}, nil
}

// overQuota says why g would take p's tenant (holding u) past a limit
// of tc, or into the slots kept for administrators; "" if it would not.
// The privileged are bound only by the state machine's own limits. Pure:
// the policy's table test drives it.
func overQuota(tc TenantsConfig, p api.Principal, u fsm.Usage, g growth) string {
	if p.Privileged() {
		return ""
	}
	if g.job && tc.MaxJobNodes > 0 && (g.workers == 0 || g.workers > tc.MaxJobNodes) {
		asked := "every node (no max_workers)"
		if g.workers > 0 {
			asked = fmt.Sprintf("up to %d nodes", g.workers)
		}
		return fmt.Sprintf("the job asks for %s; a job of the tenant may take %d (--tenant-max-job-nodes): set max_workers (or workers) to at most %d", asked, tc.MaxJobNodes, tc.MaxJobNodes)
	}
	why := tc.limits().Exceeded(u, fsm.Growth{Job: g.job, Dataset: g.dataset, Consumer: g.consumer, SpecBytes: g.specBytes})
	if why != "" && g.dataset && strings.Contains(why, "--tenant-max-datasets") {
		why += fmt.Sprintf(" (%v)", tc.DatasetGCAfter)
	}
	return why
}

// limits are tc's bounds of the replicated state, as a Quota command
// carries them.
func (tc TenantsConfig) limits() fsm.Limits {
	return fsm.Limits{MaxJobs: tc.MaxJobs, MaxDatasets: tc.MaxDatasets, MaxConsumers: tc.MaxConsumers, MaxSpecBytes: tc.MaxStateBytes, AdminReserve: tc.AdminReserve}
}

// quotaGuard is c as p proposes it at protocol level level: a tenant's
// command that may add a job, dataset or consumer, wrapped in its
// tenant's limits (fsm.NewQuota), so that every replica's apply refuses
// it past them whatever this leader's check let through; the privileged's
// commands, and every command below ProtocolQuotas, as they are.
func (n *Node) quotaGuard(p api.Principal, level int, c fsm.Command) fsm.Command {
	if p.Privileged() || level < fsm.ProtocolQuotas {
		return c
	}
	return fsm.NewQuota(n.cfg.Tenants.limits(), c)
}

// maxDatasetGCPerRound bounds the datasets one round of the job loop
// removes, so that a backlog does not hold the leader's loop.
const maxDatasetGCPerRound = 64

// collectDatasets runs on the leader's job loop: it removes the datasets
// no job has read for Config.Tenants.DatasetGCAfter (measured from when
// this leader first saw each unread, and from its registration by the
// state machine), at most maxDatasetGCPerRound a round. unread is the
// loop's own memory (reset when this node does not lead).
func (n *Node) collectDatasets(ctx context.Context, now time.Time, unread map[string]time.Time) {
	after := n.cfg.Tenants.DatasetGCAfter
	if after <= 0 || n.clusterProtocol() < fsm.ProtocolOwners {
		return
	}
	ds := n.raft.UnreadDatasets()
	seen := make(map[string]bool, len(ds))
	removed := 0
	for _, d := range ds {
		seen[d.Fingerprint] = true
		since, ok := unread[d.Fingerprint]
		if !ok {
			unread[d.Fingerprint] = now
			continue
		}
		if now.Sub(since) < after || removed >= maxDatasetGCPerRound {
			continue
		}
		if _, err := n.raft.Apply(ctx, fsm.NewGarbageCollectDataset(d.Fingerprint, after)); err != nil {
			n.log.Debug("garbage-collect dataset", "dataset", d.Fingerprint, "err", err)
			continue
		}
		removed++
		delete(unread, d.Fingerprint)
		n.log.Info("garbage-collected a dataset no job reads", "dataset", d.Fingerprint, "tenant", fsm.TenantOf(d.Owner))
	}
	for fp := range unread {
		if !seen[fp] {
			delete(unread, fp) // read again, or gone
		}
	}
}
