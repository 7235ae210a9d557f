package observe

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/diagnose"
)

// Snapshot is what /status.json returns: the cluster as one node sees it.
type Snapshot struct {
	// At is when the snapshot was taken.
	At time.Time `json:"at"`
	// Node is the answering node's view of the Raft group.
	Node    api.Status   `json:"node"`
	Members []api.Member `json:"members"`
	// Jobs come from the leader; when it does not answer within the
	// request timeout, from this node's replica, and JobsStale says so
	// (with the error in JobsError).
	Jobs      []JobSnapshot `json:"jobs"`
	JobsStale bool          `json:"jobs_stale,omitempty"`
	JobsError string        `json:"jobs_error,omitempty"`
}

// JobSnapshot is a job with what its workers report about it.
type JobSnapshot struct {
	api.JobInfo
	// Batches sums the batches the workers' tasks queued for consumers:
	// the page draws the job's throughput from its growth.
	Batches int64 `json:"batches"`
	// Ops sums the workers' per-op statistics (one worker pipeline's
	// worth per PipelineSeconds, as `feedmesh diagnose --job`).
	Ops             []pipeline.OpStats `json:"ops,omitempty"`
	Bounding        int                `json:"bounding"`
	PipelineSeconds float64            `json:"pipeline_seconds"`
	// Diagnosis is Plumber's analysis of those statistics on the
	// workers' cores (nil until a pipeline has run, or when it fails:
	// DiagnosisError).
	Diagnosis      *Diagnosis `json:"diagnosis,omitempty"`
	DiagnosisError string     `json:"diagnosis_error,omitempty"`
	// Unreachable lists workers that did not answer.
	Unreachable []string `json:"unreachable,omitempty"`
}

// Diagnosis is the part of a diagnose.Report the page shows.
type Diagnosis struct {
	BoundingOp string `json:"bounding_op"`
	Why        string `json:"why"`
	// Cores is the budget of the recommendation: the smallest GOMAXPROCS
	// among the workers.
	Cores float64 `json:"cores"`
	// Measured, Predicted and RecommendedPredicted are outputs (elements
	// of the last op) per second of one worker pipeline.
	Measured             float64 `json:"measured_elements_per_second"`
	Predicted            float64 `json:"predicted_elements_per_second"`
	RecommendedPredicted float64 `json:"recommended_predicted_elements_per_second"`
	RecommendedBinding   string  `json:"recommended_binding"`
	// Parallelism is the recommended parallelism per op index (maps
	// whose parallelism should change); PrefetchAfter the op indices a
	// prefetch should follow.
	Parallelism   map[int]int `json:"parallelism,omitempty"`
	PrefetchAfter []int       `json:"prefetch_after,omitempty"`
}

// snapshot gathers a Snapshot of the jobs p may see (its tenant's; an
// administrator's: every tenant's) within o.RequestTimeout per request.
func snapshot(ctx context.Context, n *mesh.Node, p api.Principal, o Options) Snapshot {
	s := Snapshot{At: time.Now(), Node: n.Status(), Members: n.Members()}
	jctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	jobs, err := n.JobsAs(jctx, p)
	cancel()
	if err != nil {
		jobs, s.JobsStale, s.JobsError = n.LocalJobsAs(p), true, err.Error()
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Name < jobs[j].Name })
	s.Jobs = make([]JobSnapshot, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		s.Jobs[i] = JobSnapshot{JobInfo: j, Bounding: -1}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fillJob(ctx, n, o, &s.Jobs[i])
		}()
	}
	wg.Wait()
	return s
}

// fillJob asks the job's live workers for their per-op statistics (one
// request each, concurrently) and diagnoses their sum.
func fillJob(ctx context.Context, n *mesh.Node, o Options, j *JobSnapshot) {
	type answer struct {
		name string
		st   api.WorkerOpStats
		err  error
	}
	var live []api.WorkerInfo
	for _, w := range j.Workers {
		if !w.Expired {
			live = append(live, w)
		}
	}
	answers := make([]answer, len(live))
	var wg sync.WaitGroup
	for i, w := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case o.workerSlots <- struct{}{}:
				defer func() { <-o.workerSlots }()
			case <-ctx.Done():
				answers[i] = answer{w.Name, api.WorkerOpStats{}, ctx.Err()}
				return
			}
			wctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
			defer cancel()
			st, err := n.WorkerOpStats(wctx, w.Name, w.Addr, j.Name)
			answers[i] = answer{w.Name, st, err}
		}()
	}
	wg.Wait()
	var tasks []api.TaskOpStats
	var cores []int
	for _, a := range answers {
		if a.err != nil {
			j.Unreachable = append(j.Unreachable, a.name)
			continue
		}
		for _, t := range a.st.Tasks {
			if t.Job == j.Name {
				tasks, cores = append(tasks, t), append(cores, a.st.Cores)
			}
		}
	}
	total := api.SumOpStats(tasks, cores)
	sum := total.Stats
	j.Batches, j.PipelineSeconds = total.Batches, total.Seconds
	cores0 := total.Cores
	j.Ops, j.Bounding = sum.Ops, sum.Bounding
	if len(sum.Ops) == 0 || j.PipelineSeconds <= 0 {
		return
	}
	ds, ok := n.Raft().Dataset(j.Fingerprint)
	if !ok {
		j.DiagnosisError = "this node's replica does not have the job's dataset yet"
		return
	}
	spec, err := pipeline.DecodeCanonical(ds.Spec)
	if err != nil {
		j.DiagnosisError = err.Error()
		return
	}
	r, err := diagnose.Analyze(spec, diagnose.Run{Ops: sum.Ops, Seconds: j.PipelineSeconds}, diagnose.Budget{Cores: float64(max(cores0, 1))})
	if err != nil {
		j.DiagnosisError = err.Error()
		return
	}
	j.Diagnosis = &Diagnosis{
		BoundingOp: r.BoundingOp, Why: r.Why, Cores: r.Cores,
		Measured: r.MeasuredElementsPerSecond, Predicted: r.PredictedElementsPerSecond,
		RecommendedPredicted: r.RecommendedPredictedElementsPerSecond, RecommendedBinding: r.RecommendedBinding,
		Parallelism: r.Plan.Parallelism, PrefetchAfter: r.Plan.PrefetchAfter,
	}
}
