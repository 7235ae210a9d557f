package mesh

import (
	"context"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/worker"
	"github.com/feedmesh/feedmesh/pipeline"
)

// nodeControl is the node's side of worker.Control: each call is
// answered through Raft on the leader, forwarded there when this node
// does not lead.
type nodeControl struct{ n *Node }

var _ worker.Control = nodeControl{}

func (c nodeControl) Lease(ctx context.Context, req api.LeaseRequest) (api.LeaseResponse, error) {
	return c.n.lease(ctx, req)
}

func (c nodeControl) Finish(ctx context.Context, req api.FinishRequest) error {
	return c.n.finish(ctx, req)
}

func (c nodeControl) Produce(ctx context.Context, req api.ProduceRequest) error {
	return c.n.produce(ctx, req)
}

func (c nodeControl) HandBack(ctx context.Context, req api.HandBackRequest) error {
	return c.n.handBack(ctx, req)
}

// leaserConfig is the lease loop of a production of job (a job, or a
// share group) on this node: sized by the node's WorkerConfig, draining
// with the node.
func (n *Node) leaserConfig(job string, all pipeline.SplitList, exact bool) worker.Config {
	w := n.cfg.Worker
	return worker.Config{
		Job: job, Worker: n.name, Incarnation: n.incarnation, Splits: all, Exact: exact,
		LeaseSplits: w.LeaseSplits, LeaseDuration: w.LeaseDuration, FailoverAhead: w.failoverAhead(n.cfg.Raft),
		Poll: w.OrphanPollInterval, ProduceInterval: w.produceInterval(), RequestTimeout: n.cfg.RequestTimeout,
		Drain: n.worker.drainCh, Log: n.log,
	}
}

// splitByID returns the split with the given id: ids are positions in the
// deterministic enumeration every node computes.
func splitByID(all pipeline.SplitList, id int64) (pipeline.Split, error) {
	s, ok := all.ByID(id)
	if !ok {
		return pipeline.Split{}, fmt.Errorf("split %d does not exist in this worker's view of the dataset (%d splits): do all nodes see the same files?", id, all.Len())
	}
	return s, nil
}
