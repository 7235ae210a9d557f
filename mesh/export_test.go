package mesh

import (
	"context"
	"time"

	"github.com/feedmesh/feedmesh/api"
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
