package worker

import (
	"sort"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
)

// What a worker reports about its work: its tasks (Tasks), its sharing
// counters (ShareStats, summed per job by the leader in sharestats.go) and
// the batches it encoded (Work).

// TaskStats describes one task running on this node.
type TaskStats struct {
	Job string
	// Produced counts batches the task encoded and queued, and
	// ProducedBytes their encoded size (0 for coordinated jobs' tasks).
	Produced      int64
	ProducedBytes int64
	// Queued is how many of them wait for a consumer.
	Queued int
	// Ended: the task's production has ended (end of data or failure); the
	// task stays until its job is gone.
	Ended bool
	// LeaseWait is how long the production waited for a lease with no
	// split queued (DYNAMIC); OfferWait, how long for room in its full
	// queue (its consumers took batches slower than it made them).
	LeaseWait, OfferWait time.Duration
}

// Tasks lists the tasks running on this worker.
func (w *Worker) Tasks() []TaskStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]TaskStats, 0, len(w.tasks))
	for _, t := range w.tasks {
		out = append(out, TaskStats{Job: t.job.Name, Produced: t.produced.Load(), ProducedBytes: t.producedBytes.Load(), Queued: t.prod.queued(), Ended: t.hasEnded(),
			LeaseWait: time.Duration(t.leaseWait.Load()), OfferWait: time.Duration(t.offerWait.Load())})
	}
	return out
}

// ShareStats returns this worker's sharing counters, for job only unless
// job is empty.
func (w *Worker) ShareStats(job string) api.WorkerShareStats {
	out := api.WorkerShareStats{Worker: w.name, WindowLimit: w.cfg.ShareWindowBytes, Produced: w.shareProduced.Load()}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.prods {
		out.Windows++
		out.Bytes += p.shared.Stats().Bytes
	}
	for name, t := range w.tasks {
		r, ok := t.prod.(*sharedReader)
		if !ok || (job != "" && name != job) {
			continue
		}
		st, ws := r.statsLocked()
		out.Jobs = append(out.Jobs, api.JobShareStats{
			Job: name, Read: st.Read, Hits: st.Hits, Produced: st.Produced, EvictedBeforeRead: st.EvictedBeforeRead,
			WindowProduced: ws.Produced, WindowBytes: ws.Bytes,
		})
	}
	sort.Slice(out.Jobs, func(i, j int) bool { return out.Jobs[i].Job < out.Jobs[j].Job })
	return out
}

// WorkCounters are what a worker's pipelines produced since it started,
// shared or not: the preprocessing work, as benchmarks count it.
type WorkCounters struct {
	// Batches counts encoded batches; Rows their elements (leading
	// dimension of the first tensor, 1 for unbatched elements).
	Batches, Rows int64
	// SharedBatches counts the batches of shared productions.
	SharedBatches int64
}

// Work returns this worker's work counters.
func (w *Worker) Work() WorkCounters {
	return WorkCounters{Batches: w.encodedBatches.Load(), Rows: w.encodedRows.Load(), SharedBatches: w.shareProduced.Load()}
}

// countEncoded records one encoded batch of el in the work counters.
func (w *Worker) countEncoded(el pipeline.Element) {
	w.encodedBatches.Add(1)
	rows := int64(1)
	if len(el.Tensors) > 0 && len(el.Tensors[0].Shape) > 0 {
		rows = el.Tensors[0].Shape[0]
	}
	w.encodedRows.Add(rows)
}
