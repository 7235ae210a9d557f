package mesh

import (
	"context"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/fsm"
)

// JobGet is jobGet for the tests of package mesh_test: what a worker asks
// the control plane about a job.
func (n *Node) JobGet(ctx context.Context, job string) (api.JobGetResponse, error) {
	return n.jobGet(ctx, api.JobRequest{Job: job})
}

// HoldProbes takes every link-probe slot, as callers that never read their
// answers would; the returned func gives them back.
func (n *Node) HoldProbes() func() {
	for range maxProbes {
		n.probes <- struct{}{}
	}
	return func() {
		for range maxProbes {
			<-n.probes
		}
	}
}

// Detach is detach for the tests of package mesh_test: a consumer leaves.
func (n *Node) Detach(ctx context.Context, job, consumer string) error {
	return n.detach(ctx, api.JobRequest{Job: job, Consumer: consumer})
}

// FlushAudit writes every pending summary of left-out audit lines, as
// Close does.
func (n *Node) FlushAudit() { n.flushAudit(time.Now(), true) }

// ProposeForTenant proposes c for p as the leader does once p's quota
// check passed (quotaGuard), without that check: what a leader whose
// check a race or a change of leader let through would propose. The
// answer is mapped as a caller's.
func (n *Node) ProposeForTenant(ctx context.Context, p api.Principal, c fsm.Command) error {
	_, err := n.raft.Apply(ctx, n.quotaGuard(p, n.clusterProtocol(), c))
	if err != nil {
		return mapRaftErr(err)
	}
	return nil
}
