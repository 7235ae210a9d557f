package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// A job's decisions belong to the job (issue 42): what offload auto chose
// for it (a cut: JobOptions.OffloadBoundary, set when the job was created
// or while it ran) and the options it was created with are the job's, and
// the cluster refuses a consumer that asks for other ones. So a consumer
// that leaves an option unset adopts the job's value instead of asking for
// its own default:
//
//   - the cut, by every consumer under offload auto or remote, whether it
//     joins the job or resumes it (a consumer that asks for local or a
//     fraction, which runs no local worker beside a cut, is refused, as is
//     one that asks for another cut: the error names the option);
//   - the workers (Workers, MaxWorkers, Autoscale and its knobs), by a
//     resume.
//
// A resume adopts them from the job of that name while the cluster holds
// it (the resume replaces it, and only with the same options), else from
// the checkpoint, which records the job's options when it was taken: a
// resume under auto after the job was garbage-collected resumes it cut as
// it was. Options the user set are never overridden; those that conflict
// with the job's are refused by the cluster, which names them.

// existingJob returns the job named name as the cluster holds it. exists
// is false when there is none, or when it could not be read (the cluster
// then decides alone).
func (c *Client) existingJob(ctx context.Context, name string) (info api.JobInfo, exists bool) {
	var resp api.JobGetResponse
	if err := c.call(ctx, api.MethodJobGet, api.JobRequest{Job: name}, &resp); err != nil {
		if !errors.Is(err, transport.ErrNotFound) {
			c.opts.Logger.Debug("distribute: reading the job's options", "job", name, "err", err)
		}
		return api.JobInfo{}, false
	}
	return resp.Job, true
}

// adopt fills into req.Options what the consumer of options n adopts from
// the job (or, resuming a job that is gone, from the checkpoint from), and
// sets off's cut to match; with neither, offload auto may cut a new job
// from this host's profile (autoCut). Adopted options are other options
// than the consumer's: they are normalized again, and the cluster checks
// them as any.
func (c *Client) adopt(ctx context.Context, spec *pipeline.Spec, n jobspec.Normalized, req *api.DistributeRequest, off *offloadRun, from *checkpoint) error {
	job, exists := c.existingJob(ctx, n.Name())
	var have *api.JobOptions
	switch {
	case exists:
		have = &job.Options
	case from != nil && from.Options != nil:
		have = from.Options
	case from == nil && off.requested == jobspec.OffloadAuto && off.mode == jobspec.OffloadAuto:
		// A new job: auto may cut it from this host's profile.
		if cut, pred, why := c.autoCut(ctx, spec); cut > 0 {
			req.Options.OffloadBoundary = cut
			off.mode, off.cut, off.reason, off.predicted = jobspec.OffloadRemote, cut, why, pred
		}
		return nil
	default:
		return nil
	}
	if err := adoptCut(spec, n, req, off, *have, exists, from != nil); err != nil {
		return err
	}
	// A consumer that set none of the workers options takes the job's
	// (or the checkpoint's): a job created with workers auto, by its
	// first consumer or by a release whose default was auto, is joined
	// and resumed without a mismatch on options this consumer never set.
	adoptWorkers(n, &req.Options, *have)
	adopted, err := req.Options.Normalize()
	if err != nil {
		source := "the checkpoint"
		if exists {
			source = fmt.Sprintf("job %q", n.Name())
		}
		return fmt.Errorf("the options adopted from %s: %w", source, err)
	}
	req.Options = adopted.Options()
	req.Options.Resume = nil
	return nil
}

// adoptCut adopts the cut of the job's options have (the job's when it
// exists, else the checkpoint's), or refuses a consumer whose offload
// options the job cannot run.
func adoptCut(spec *pipeline.Spec, n jobspec.Normalized, req *api.DistributeRequest, off *offloadRun, have api.JobOptions, exists, resume bool) error {
	cut, asked := have.OffloadBoundary, n.Job().OffloadBoundary()
	name := n.Name()
	orElse := fmt.Sprintf("or read under another job name than %q", name)
	if resume {
		orElse = fmt.Sprintf("or resume once the job is gone (it is garbage-collected gc_after, %v, after its last consumer left)", have.GCAfter)
	}
	switch {
	case asked > 0:
		switch {
		case !exists || asked == cut:
			return nil // a job that is gone binds nothing: the cut asked for
		case cut == 0:
			return fmt.Errorf("%w: job %q is not cut (the nodes run its whole pipeline), and this consumer asks OffloadBoundary %d (feedmesh read --offload-boundary, Python offload_boundary): every consumer of a job runs the same cut; leave OffloadBoundary unset to adopt the job's, %s",
				ErrOffloadOptions, name, asked, orElse)
		}
		return fmt.Errorf("%w: job %q is cut after %d ops (offload_boundary %d, as offload auto or its first consumer chose), and this consumer asks OffloadBoundary %d (feedmesh read --offload-boundary, Python offload_boundary): every consumer of a job runs the same cut; leave OffloadBoundary unset to adopt the job's, or give %d, %s",
			ErrOffloadOptions, name, cut, cut, asked, cut, orElse)
	case cut == 0:
		return nil
	case off.requested == jobspec.OffloadAuto || off.requested == jobspec.OffloadRemote && exists:
		// (A job that is gone binds nothing: offload remote asked for
		// the nodes to prepare everything, and gets it.)
	case exists:
		return fmt.Errorf("%w: job %q is cut after %d ops (offload_boundary %d, as offload auto or its first consumer chose), and this consumer asks offload %s (JobOptions.Offload, feedmesh read --offload, Python offload): a cut job runs no local worker; use offload auto (the default) or remote, which adopt the cut, %s",
			ErrOffloadOptions, name, cut, cut, n.Consumer().Offload(), orElse)
	default:
		return nil // local or a fraction, resuming a job that is gone
	}
	err := spec.CheckCut(cut)
	if err == nil {
		err = suffixRunsHere(spec, cut)
	}
	switch {
	case err != nil && exists:
		return fmt.Errorf("%w: job %q is cut after %d ops (offload_boundary %d, as offload auto or its first consumer chose), and every consumer runs the ops after the cut, which cannot run here (an op registered only in the node binary?): %w",
			ErrOffloadOptions, name, cut, cut, err)
	case err != nil:
		return nil // the checkpoint's cut: auto goes on without one
	}
	req.Options.OffloadBoundary = cut
	off.mode, off.cut, off.predicted = jobspec.OffloadRemote, cut, 0
	switch {
	case !exists:
		off.reason = fmt.Sprintf("auto: resumed with the cut the checkpoint records (after %d ops, as offload auto or the job's first consumer chose): the nodes run the source and ops [0, %d), this client ops [%d, %d)", cut, cut, cut, len(spec.Ops))
	case off.requested == jobspec.OffloadRemote:
		off.reason = fmt.Sprintf("offload remote: the job cuts its pipeline after %d ops (as offload auto or its first consumer chose), and every consumer runs the rest: the nodes run the source and ops [0, %d), this client ops [%d, %d)", cut, cut, cut, len(spec.Ops))
	default:
		off.reason = fmt.Sprintf("auto: the job cuts its pipeline after %d ops (as its first consumer chose); this client runs the rest", cut)
	}
	return nil
}

// adoptWorkers gives a consumer the job's workers (have's: the running
// job's, or its checkpoint's) when it set none of them.
func adoptWorkers(n jobspec.Normalized, req *api.JobOptions, have api.JobOptions) {
	if !n.Consumer().WorkersUnset() || have.Workers == "" {
		return
	}
	req.Workers, req.MaxWorkers, req.Autoscale = have.Workers, have.MaxWorkers, have.Autoscale
	req.AutoscaleThreshold, req.AutoscaleRevisit, req.AutoscalePause = have.AutoscaleThreshold, have.AutoscaleRevisit, have.AutoscalePause
}
