package worker

import (
	"runtime"
	"sort"
	"sync"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	_ "github.com/feedmesh/feedmesh/pipeline/diagnose" // registers the tuner of `parallelism: auto`
)

// opStatsLog keeps the per-op statistics of the pipelines one task (or one
// shared production) ran, one after another: the ended ones summed, plus
// the one open now. Its size is one pipeline's ops, whatever the number of
// pipelines.
type opStatsLog struct {
	mu    sync.Mutex
	ended pipeline.Stats
	open  pipeline.Iterator
}

// begin records that it is the pipeline running now.
func (l *opStatsLog) begin(it pipeline.Iterator) {
	l.mu.Lock()
	l.open = it
	l.mu.Unlock()
}

// end adds it, which has been closed, to the ended pipelines.
func (l *opStatsLog) end(it pipeline.Iterator) {
	st := it.Stats()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == it {
		l.open = nil
	}
	if sum, err := l.ended.Sum(st); err == nil {
		l.ended = sum
	}
}

// snapshot returns the sum of the ended pipelines and the open one.
func (l *opStatsLog) snapshot() pipeline.Stats {
	l.mu.Lock()
	ended, open := l.ended, l.open
	l.mu.Unlock()
	if open == nil {
		sum, _ := ended.Sum(pipeline.Stats{})
		return sum
	}
	sum, err := ended.Sum(open.Stats())
	if err != nil {
		return ended
	}
	return sum
}

// OpStats returns the per-op statistics of this worker's tasks, for job only
// unless job is empty (api.MethodOpStats).
func (w *Worker) OpStats(job string) api.WorkerOpStats {
	out := api.WorkerOpStats{Worker: w.name, Cores: runtime.GOMAXPROCS(0)}
	w.mu.Lock()
	type entry struct {
		t   *task
		log *opStatsLog
	}
	var ts []entry
	for name, t := range w.tasks {
		if job != "" && name != job {
			continue
		}
		ts = append(ts, entry{t, t.opStatsLog()})
	}
	w.mu.Unlock()
	for _, e := range ts {
		st := e.log.snapshot()
		out.Tasks = append(out.Tasks, api.TaskOpStats{
			Job: e.t.job.Name, Seconds: st.Elapsed.Seconds(), Ops: st.Ops, Bounding: st.Bounding,
			Batches: e.t.produced.Load(), Queued: e.t.prod.queued(), Ended: e.t.hasEnded(),
		})
	}
	sort.Slice(out.Tasks, func(i, j int) bool { return out.Tasks[i].Job < out.Tasks[j].Job })
	return out
}

// coreShare is the core budget an autotuned pipeline on this node may
// allocate (pipeline.Options.Cores, asked at every revision): GOMAXPROCS
// shared equally by the tasks still producing.
func (w *Worker) coreShare() float64 {
	w.mu.Lock()
	n := 0
	for _, t := range w.tasks {
		if !t.hasEnded() {
			n++
		}
	}
	w.mu.Unlock()
	return float64(runtime.GOMAXPROCS(0)) / float64(max(n, 1))
}
