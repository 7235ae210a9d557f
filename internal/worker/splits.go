package worker

import (
	"fmt"

	"github.com/feedmesh/feedmesh/pipeline"
)

// leaseConfig is the lease loop of a production of job (a job, or a
// share group) on this worker: sized by its Config, draining with it.
func (w *Worker) leaseConfig(job string, all pipeline.SplitList, exact bool) LeaseConfig {
	c := w.cfg
	return LeaseConfig{
		Job: job, Worker: w.name, Incarnation: w.incarnation, Splits: all, Exact: exact,
		LeaseSplits: c.LeaseSplits, LeaseDuration: c.LeaseDuration, FailoverAhead: c.failoverAhead(w.failover), HoldShare: c.LeaseHoldShare,
		Poll: c.OrphanPollInterval, ProduceInterval: c.produceInterval(), RequestTimeout: w.requestTimeout,
		Drain: w.drainCh, Log: w.log,
	}
}

// splitByID returns the split with the given id: ids are positions in the
// deterministic enumeration every worker computes.
func splitByID(all pipeline.SplitList, id int64) (pipeline.Split, error) {
	s, ok := all.ByID(id)
	if !ok {
		return pipeline.Split{}, fmt.Errorf("split %d does not exist in this worker's view of the dataset (%d splits): do all nodes see the same files?", id, all.Len())
	}
	return s, nil
}
