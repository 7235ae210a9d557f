package client

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// JobOpStats are a running job's per-op pipeline statistics, as its
// workers report them (api.MethodOpStats, answered by each worker itself).
type JobOpStats struct {
	// Job is the job as the cluster lists it, and Spec its dataset's spec.
	Job  api.JobInfo
	Spec *pipeline.Spec
	// Workers has one entry per worker that answered and runs a task of
	// the job, sorted by name.
	Workers []WorkerTaskOpStats
	// Unreachable lists the workers that did not answer within the
	// request timeout.
	Unreachable []string
}

// WorkerTaskOpStats is one worker's task of the job.
type WorkerTaskOpStats struct {
	Worker string
	// Cores is the worker's GOMAXPROCS.
	Cores int
	api.TaskOpStats
}

// JobOpStats asks each live worker of job for the per-op statistics of its
// task (concurrently, each within RequestTimeout), with the job's spec. An
// unknown job is an error that wraps transport.ErrNotFound.
func (c *Client) JobOpStats(ctx context.Context, job string) (JobOpStats, error) {
	var resp api.JobGetResponse
	if err := c.call(ctx, api.MethodJobGet, api.JobRequest{Job: job}, &resp); err != nil {
		return JobOpStats{}, err
	}
	spec, err := pipeline.DecodeCanonical(resp.Spec)
	if err != nil {
		return JobOpStats{}, fmt.Errorf("job %q: its spec: %w", job, err)
	}
	out := JobOpStats{Job: resp.Job, Spec: spec}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, w := range out.Job.Workers {
		if w.Expired || w.Addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.workerOpStats(ctx, w.Addr, job)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Unreachable = append(out.Unreachable, w.Name)
				return
			}
			for _, t := range st.Tasks {
				if t.Job == job {
					out.Workers = append(out.Workers, WorkerTaskOpStats{Worker: w.Name, Cores: st.Cores, TaskOpStats: t})
				}
			}
		}()
	}
	wg.Wait() // a worker that did not answer within ctx is listed as unreachable
	sort.Slice(out.Workers, func(i, j int) bool { return out.Workers[i].Worker < out.Workers[j].Worker })
	sort.Strings(out.Unreachable)
	return out, nil
}

func (c *Client) workerOpStats(ctx context.Context, addr, job string) (api.WorkerOpStats, error) {
	ctx, cancel := context.WithTimeout(transport.WithToken(ctx, c.opts.Token), c.opts.RequestTimeout)
	defer cancel()
	var st api.WorkerOpStats
	if err := transport.Call(ctx, c.tr, c.codec, addr, api.MethodOpStats, api.OpStatsRequest{Job: job}, &st); err != nil {
		return st, fmt.Errorf("%s at %s: %w", api.MethodOpStats, addr, err)
	}
	return st, nil
}

// Sum sums the workers' tasks into one worker pipeline's statistics
// (api.SumOpStats); Included indexes Workers.
func (s JobOpStats) Sum() api.OpStatsSum {
	tasks := make([]api.TaskOpStats, len(s.Workers))
	cores := make([]int, len(s.Workers))
	for i, w := range s.Workers {
		tasks[i], cores[i] = w.TaskOpStats, w.Cores
	}
	return api.SumOpStats(tasks, cores)
}
