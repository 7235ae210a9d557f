package mesh

import (
	"context"

	"github.com/feedmesh/feedmesh/mesh/api"
)

// JobGet is jobGet for the tests of package mesh_test: what a worker asks
// the control plane about a job.
func (n *Node) JobGet(ctx context.Context, job string) (api.JobGetResponse, error) {
	return n.jobGet(ctx, api.JobRequest{Job: job})
}
