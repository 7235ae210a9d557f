package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/diagnose"
)

// jobDiagnosis is what `diagnose --job` adds to a diagnosis: whose
// statistics it is.
type jobDiagnosis struct {
	Job string `json:"job"`
	// Workers are the workers whose statistics were summed; Unreachable
	// those that did not answer.
	Workers     []string `json:"workers"`
	Unreachable []string `json:"unreachable,omitempty"`
	// PipelineSeconds is the wall time the workers' pipelines ran, summed
	// over the workers: the figures below are per worker pipeline.
	PipelineSeconds float64 `json:"pipeline_seconds"`
	// Mismatched counts workers left out because their ops differ (a
	// worker on another version of the spec).
	Mismatched int `json:"mismatched,omitempty"`
	// SplitWaitShare is the share of that time the sources waited for
	// splits (the job's leases).
	SplitWaitShare float64 `json:"split_wait_share"`
	*diagnose.Report
}

func (j *jobDiagnosis) writeHeader(w io.Writer) {
	fmt.Fprintf(w, "job %s: statistics of %d workers (%s), summed over %.1f s of pipeline time; the figures are per worker pipeline\n",
		j.Job, len(j.Workers), strings.Join(j.Workers, ", "), j.PipelineSeconds)
	fmt.Fprintf(w, "waiting for splits (leases): %.0f %% of it; the rest of the gap between measured and predicted is time the workers' queues were full (consumers slower than the pipeline)\n", 100*j.SplitWaitShare)
	if len(j.Unreachable) > 0 {
		fmt.Fprintf(w, "not answering, left out: %s\n", strings.Join(j.Unreachable, ", "))
	}
	if j.Mismatched > 0 {
		fmt.Fprintf(w, "left out: %d workers whose pipeline has other ops (another version of the spec?)\n", j.Mismatched)
	}
}

// diagnoseJob is `feedmesh diagnose --job NAME`: it gathers the job's
// per-op statistics from its workers (each worker's since its task
// started), sums them into one run of one worker pipeline and diagnoses
// that. specArg (optional) is the spec file the job was started from; it
// must be the job's dataset, and --write rewrites it.
func diagnoseJob(ctx context.Context, cf *clientFlags, job, specArg string, o diagnoseOut, stdout, stderr io.Writer) error {
	c, err := cf.dial(ctx, perWorkerTimeout(cf))
	if err != nil {
		return err
	}
	defer c.Close()
	qctx, cancel := context.WithTimeout(ctx, *cf.timeout)
	defer cancel()
	js, err := c.JobOpStats(qctx, job)
	if err != nil {
		return err
	}
	spec, specPath := js.Spec, ""
	if specArg != "" {
		var local *pipeline.Spec
		if specPath, local, err = loadSpecArg(specArg); err != nil {
			return err
		}
		if fp, _ := local.Fingerprint(); fp != js.Job.Fingerprint {
			return cli.InputError(fmt.Errorf("%s is dataset %.12s, job %q reads dataset %.12s: give the spec the job was started from", specArg, fp, job, js.Job.Fingerprint))
		}
		spec = local
	}
	run, d, err := jobRun(js)
	if err != nil {
		return err
	}
	if !o.coresGiven {
		o.cores = float64(max(js.Sum().Cores, 1))
	}
	if run.Ops[0].ElementsOut < 20 {
		fmt.Fprintf(stderr, "diagnose: the job's workers have read only %d source elements: the figures are rough (diagnose again later)\n", run.Ops[0].ElementsOut)
	}
	return o.report(stdout, spec, specPath, run, d)
}

// jobRun sums the workers' statistics into one diagnose.Run: rates per
// worker pipeline (elements and busy seconds over pipeline seconds).
func jobRun(js client.JobOpStats) (diagnose.Run, *jobDiagnosis, error) {
	d := &jobDiagnosis{Job: js.Job.Name, Unreachable: js.Unreachable}
	sum := js.Sum()
	for _, i := range sum.Included {
		d.Workers = append(d.Workers, js.Workers[i].Worker)
	}
	d.PipelineSeconds, d.Mismatched = sum.Seconds, sum.Mismatched
	if len(d.Workers) == 0 {
		why := "no worker has run the job's pipeline yet"
		if len(js.Unreachable) > 0 {
			why += "; not answering: " + strings.Join(js.Unreachable, ", ")
		}
		if js.Job.State != "" && js.Job.State != api.JobRunning {
			why = fmt.Sprintf("job %q is %s and its workers keep no statistics of it any more", js.Job.Name, js.Job.State)
		}
		return diagnose.Run{}, nil, fmt.Errorf("diagnose --job %s: %s", js.Job.Name, why)
	}
	d.SplitWaitShare = min(sum.Stats.Ops[0].WaitSeconds/d.PipelineSeconds, 1)
	return diagnose.Run{Ops: sum.Stats.Ops, Seconds: d.PipelineSeconds}, d, nil
}

// perWorkerTimeout is the client options of commands that ask every worker
// within one --timeout: each request (to a worker, or the job's lookup)
// gets a third of it, so a worker that does not answer is listed as such
// instead of using up the command's time.
func perWorkerTimeout(cf *clientFlags) client.Options {
	return client.Options{RequestTimeout: max(*cf.timeout/3, 100*time.Millisecond)}
}
