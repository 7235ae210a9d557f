package mesh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/raftnode"
	"github.com/feedmesh/feedmesh/internal/worker"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Distribute registers spec's dataset, creates (or joins) the job and
// attaches consumer to it. Any node can be asked; the leader does the work.
func (n *Node) Distribute(ctx context.Context, req api.DistributeRequest) (api.JobInfo, error) {
	return n.distribute(ctx, req)
}

func (n *Node) distribute(ctx context.Context, req api.DistributeRequest) (api.JobInfo, error) {
	if req.Consumer == "" {
		return api.JobInfo{}, transport.Errorf(transport.ErrInvalid, "job %q: consumer id is required", req.Options.Name)
	}
	// The trust boundary: whatever a client sent (a client of an older
	// release, or none of feedmesh's), the options are normalized and
	// checked here, once, and what goes on is the normalized form.
	opts, err := normalizeRequest(req.Options)
	if err != nil {
		return api.JobInfo{}, transport.Errorf(transport.ErrInvalid, "job %q: %v", req.Options.Name, err)
	}
	req.Options = opts.Options()
	req.Options.Resume = nil
	var info api.JobInfo
	err = n.onLeader(ctx, req.Forwarded, api.MethodDistribute, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, &info,
		func(ctx context.Context) error {
			var err error
			info, err = n.distributeLocal(ctx, req, opts)
			return err
		})
	return info, err
}

// normalizeRequest normalizes a distribute request's options
// (jobspec.Options.Normalize) and checks that this node's workers can
// run the job (its compression).
func normalizeRequest(o api.JobOptions) (jobspec.Normalized, error) {
	n, err := o.Normalize()
	if err != nil {
		return jobspec.Normalized{}, err
	}
	if _, err := batch.ParseCompression(n.Job().Compression()); err != nil {
		return jobspec.Normalized{}, fmt.Errorf("compression: %w", err)
	}
	return n, nil
}

// distributeLocal runs on the leader, with req's options normalized
// (opts).
func (n *Node) distributeLocal(ctx context.Context, req api.DistributeRequest, opts jobspec.Normalized) (api.JobInfo, error) {
	name, job := opts.Name(), opts.Job()
	spec, err := pipeline.DecodeCanonical(req.Spec)
	if err != nil {
		return api.JobInfo{}, transport.Errorf(transport.ErrInvalid, "job %q: dataset spec: %v", name, err)
	}
	p := principal(ctx)
	spec = spec.Bind(n.accessOf(p, name)) // all it lists and opens, through the node's policy and p's grants
	fp, err := spec.Fingerprint()
	if err != nil {
		return api.JobInfo{}, transport.Errorf(transport.ErrInvalid, "job %q: dataset spec: %v", name, err)
	}
	level := n.clusterProtocol()
	if level < fsm.ProtocolOwners && !p.Privileged() && p.Tenant != "" {
		return api.JobInfo{}, transport.Errorf(transport.ErrInvalid, "job %q: %v", name, errTenantsNeedProtocol)
	}
	if level >= fsm.ProtocolCapabilities {
		// The cluster's secret exists before the job does: a job created
		// before it is a rolling upgrade's, whose consumers hold no
		// capability (checkCapability).
		if _, err := n.ensureJobSecret(ctx); err != nil {
			return api.JobInfo{}, err
		}
	}
	_, jobExists := n.raft.JobTenant(name)
	_, datasetExists := n.raft.Dataset(fp)
	g := growth{job: !jobExists, workers: job.MaxWorkers(), dataset: !datasetExists, specBytes: len(req.Spec), consumer: !n.raft.HasConsumer(name, req.Consumer)}
	release, err := n.reserveQuota(ctx, p, name, g)
	if err != nil {
		return api.JobInfo{}, err
	}
	defer release() // once its commands are applied, the state machine counts them
	if err := n.registerDataset(ctx, p, level, name, spec, fp, req.Spec, datasetExists); err != nil {
		return api.JobInfo{}, err
	}
	if err := checkJobSpec(name, opts, spec); err != nil {
		return api.JobInfo{}, err
	}
	c := fsm.Create{Name: name, Fingerprint: fp, Options: job, CountLoss: countsLoss(job, spec), Scale: scaleStart(n.raft, fp, job)}
	if level >= fsm.ProtocolOwners {
		o := n.jobOwner(p, name)
		c.Owner = &o
	}
	if job.Sharding() == jobspec.Static {
		c.StaticWorkers = n.liveWorkers(job.MaxWorkers())
	}
	create := fsm.NewCreateJob(c)
	if r := req.Resume; r != nil {
		if err := n.checkResumePart(fp, job.Epochs(), r); err != nil {
			return api.JobInfo{}, transport.Errorf(transport.ErrInvalid, "job %q: %v", name, err)
		}
		if err := n.checkCheckpointMAC(ctx, fsm.TenantOf(c.Owner), name, r); err != nil {
			return api.JobInfo{}, err
		}
		create = fsm.NewResumeJob(c, fsm.ResumeBody{From: r.From, Part: r.Part, Want: r.Want, Delivered: r.Delivered})
		if err := n.fenceForResume(ctx, name, c, r); err != nil {
			return api.JobInfo{}, err
		}
	}
	if level < fsm.ProtocolJobspec {
		// A server of an older release refuses CreateJob v6: propose the
		// legacy form, which every release applies alike.
		create, _ = fsm.DowngradeCreateJob(create)
	}
	if _, err := n.raft.Apply(ctx, n.quotaGuard(p, level, create)); err != nil {
		if r := req.Resume; r != nil && errors.Is(err, fsm.ErrJobInUse) {
			return api.JobInfo{}, resumeInUse(err, name, r, n)
		}
		return api.JobInfo{}, jobMismatch(err, req)
	}
	if _, err := n.raft.Apply(ctx, n.quotaGuard(p, level, fsm.NewAttachConsumer(name, req.Consumer))); err != nil {
		return api.JobInfo{}, err
	}
	// Assign the live workers now, so the client can start streaming at
	// once instead of waiting for the job loop.
	n.assignWorkers(ctx, name)
	view, ok := n.raft.Job(name)
	if !ok {
		return api.JobInfo{}, transport.Errorf(transport.ErrNotFound, "job %q vanished", name)
	}
	info := n.jobInfo(view)
	if info.Capability, err = n.capabilityFor(ctx, info.Tenant, name, req.Consumer); err != nil {
		return api.JobInfo{}, err
	}
	return info, nil
}

// registerDataset records the job's dataset (spec, canonical, of
// fingerprint fp) if the state has none, its splits enumerated here as
// the workers will (through p's grants); a dataset another tenant
// registered is checked against p's grants too.
func (n *Node) registerDataset(ctx context.Context, p api.Principal, level int, name string, spec *pipeline.Spec, fp string, canonical []byte, exists bool) error {
	if _, narrowed := n.cfg.Policy.GrantsOf(p).Data(); exists && narrowed {
		// Another tenant registered it: p's grants must reach its files
		// too (its workers would refuse them; the answer is the same as
		// for a new dataset).
		if _, err := pipeline.Splits(spec); errors.Is(err, objstore.ErrNotAllowed) {
			return notAllowed(name, err)
		}
	}
	if !exists {
		// The leader enumerates the splits (like tf.data service's
		// dispatcher): it sees the same files as the workers.
		ss, err := pipeline.Splits(spec)
		if errors.Is(err, objstore.ErrNotAllowed) {
			return notAllowed(name, err)
		}
		if err != nil {
			return transport.Errorf(transport.ErrInvalid, "job %q: enumerate splits: %v", name, err)
		}
		d := fsm.Dataset{Fingerprint: fp, Spec: canonical, NumSplits: int64(len(ss))}
		register := fsm.NewRegisterDataset(d)
		if level >= fsm.ProtocolOwners {
			register = fsm.NewRegisterOwnedDataset(d, ownerOf(p))
		}
		if _, err := n.raft.Apply(ctx, n.quotaGuard(p, level, register)); err != nil {
			return err
		}
	}
	return nil
}

// checkJobSpec refuses a spec the job's options cannot run: a
// coordinated job without its bucketing op, a combination the
// composition table refuses, an unfolded take or skip under exactly-once,
// a cut the spec cannot take.
func checkJobSpec(name string, opts jobspec.Normalized, spec *pipeline.Spec) error {
	job := opts.Job()
	if job.Coordinated() {
		if _, err := worker.CoordinatedOp(spec); err != nil {
			return transport.Errorf(transport.ErrInvalid, "job %q: %v", name, err)
		}
	}
	if err := opts.CheckSpec(api.SpecFeatures(spec)); err != nil {
		return transport.Errorf(transport.ErrInvalid, "job %q: %v", name, err)
	}
	if job.Sharding() == jobspec.Dynamic && job.Delivery() == jobspec.ExactlyOnce && spec.HasTakeSkip() {
		// The client applies them to the source (pipeline.FoldTakeSkip):
		// run by each worker they would count per worker, and a take
		// would leave leased splits unread (the job would never end).
		return transport.Errorf(transport.ErrInvalid, "job %q: an exactly-once DYNAMIC job's take and skip are applied to its source by the client before it sends the spec (docs/jobs/sharding-and-delivery.md#take-and-skip); this spec still has them (a client of an older release?)", name)
	}
	if cut := job.OffloadBoundary(); cut > 0 {
		if err := spec.CheckCut(cut); err != nil {
			return transport.Errorf(transport.ErrInvalid, "job %q: %v", name, err)
		}
	}
	return nil
}

// notAllowed is the answer to a spec that names a path, URL or object
// store the node's data-access policy refuses: permission_denied, saying
// what the spec named and no more (err's text is the policy's generic
// one; the node's log has the reason).
func notAllowed(job string, err error) error {
	return transport.Errorf(transport.ErrPermissionDenied, "job %q: %v (what specs may read is the node operator's decision: docs/operating/security.md#data-access)", job, err)
}

// checkResumePart refuses a checkpoint the state machine would refuse
// only after it had replaced the job it resumes (CreateJob, to stay
// compatible with the logs it replays, removes the old job first): the
// running job must not be lost to a checkpoint that cannot resume it.
func (n *Node) checkResumePart(fp string, epochs int64, r *api.ResumePart) error {
	if r.Part == "" || r.Want < 1 || r.Want > jobspec.MaxResumeParts {
		return fmt.Errorf("resume: checkpoint of consumer %q of %d consumers: want a consumer and 1 to %d consumers", r.Part, r.Want, jobspec.MaxResumeParts)
	}
	d, ok := n.raft.Dataset(fp)
	if !ok {
		return nil // registered by this request's leader a moment ago: the state machine checks it
	}
	if err := r.Delivered.Validate(d.NumSplits, epochs, jobspec.MaxEpochs, jobspec.MaxReceiptIntervals); err != nil {
		return fmt.Errorf("resume: checkpoint of consumer %q: %w", r.Part, err)
	}
	return nil
}

// fenceForResume makes room for a resume from a checkpoint of the job
// that holds the name now (a trainer preempted, SIGKILLed, and restarted
// from its checkpoint): the checkpoint is proof that the run it was taken
// of is being resumed, so the job's consumers still attached are fenced
// (detached, and remembered as such, as a consumer that left) at once
// instead of holding the job until their leases expire (consumer_ttl).
// The resumed job replaces the job and waits for a checkpoint of each
// consumer it had; a consumer fenced that was still alive finds, at its
// next heartbeat, that the job of that name is another one, and stops
// (the client says it was fenced by a resume).
//
// Nothing is fenced unless the checkpoint is of this very job (its ID)
// and its consumer is one the job knows (attached, or one whose receipts
// it recorded): a checkpoint of an earlier run of the name, or one the
// job never saw, fences nothing, and neither does a resume whose options
// differ from the job's (CreateJob refuses it, naming them): the state
// machine decides as before. The fence is DetachConsumer, a command every release applies
// alike: no new command, and a log of fences replays on any node.
func (n *Node) fenceForResume(ctx context.Context, name string, c fsm.Create, r *api.ResumePart) error {
	view, ok := n.raft.Job(name)
	if !ok || view.ID != r.From || len(view.Consumers) == 0 || view.Dynamic == nil || !view.Admits(c) {
		return nil
	}
	_, attached := view.Consumers[r.Part]
	known := attached
	if x := view.Dynamic.Exact; !known && x != nil {
		_, known = slices.BinarySearch(x.Receivers, r.Part)
	}
	if !known {
		return nil
	}
	fenced := view.ConsumerIDs()
	for _, id := range fenced {
		if _, err := n.raft.Apply(ctx, fsm.NewDetachConsumer(name, id)); err != nil {
			return fmt.Errorf("job %q: fencing consumer %s for the resume from consumer %s's checkpoint: %w", name, id, r.Part, err)
		}
	}
	n.log.Info("resume from a checkpoint fenced the job's consumers still attached (a preempted trainer's)", "job", name, "checkpoint_of", r.Part, "fenced", fenced)
	return nil
}

// resumeInUse is the error of a resume the job refused because consumers
// read it, and what the checkpoint is of: a resume from a checkpoint of
// the job now read fences its consumers (fenceForResume), so the job is
// another run of the name, or the checkpoint's consumer one it never
// knew.
func resumeInUse(err error, name string, r *api.ResumePart, n *Node) error {
	why := fmt.Sprintf("the checkpoint is of consumer %s of job id %d", r.Part, r.From)
	if view, ok := n.raft.Job(name); ok && view.ID != r.From {
		why += fmt.Sprintf(", an earlier run of the name than the job now read (id %d), whose consumers it does not fence", view.ID)
	}
	return transport.Errorf(transport.ErrInvalid, "%v (%s)", rejectedReason(err), why)
}

// jobMismatch says, when err is the job of that name existing with other
// options, which ones (the job's value first) and what to do, without the
// Raft command's wrapping; any other err is returned as it is.
func jobMismatch(err error, req api.DistributeRequest) error {
	var m *fsm.JobMismatchError
	if !errors.As(err, &m) {
		return err
	}
	todo := "leave these options unset to adopt the job's, or give its values, or read under another job name"
	if req.Resume != nil {
		todo = "a resume replaces the job only with the same options: leave these options unset to adopt the job's, or give its values, or resume with yours once the job is gone (it is garbage-collected gc_after after its last consumer left)"
	}
	return transport.Errorf(transport.ErrInvalid, "job %q exists with other options than this consumer's: %s (the job's value first); %s", m.Job, strings.Join(m.Diffs, "; "), todo)
}

// scaleStart is where a new autoscaling job of dataset fp starts: at the
// count where the last autoscaling job of the dataset converged, if more
// than one (docs/jobs/autoscaling.md, "A repeated job").
func scaleStart(r *raftnode.Node, fp string, o jobspec.Job) *fsm.ScaleStart {
	if !o.Autoscale() {
		return nil
	}
	ds, ok := r.Dataset(fp)
	if !ok || ds.ScaleWorkers <= 1 || ds.ScaleJob == "" {
		return nil
	}
	return &fsm.ScaleStart{Workers: ds.ScaleWorkers, From: ds.ScaleJob}
}

func (n *Node) heartbeat(ctx context.Context, req api.JobRequest) (api.JobInfo, error) {
	var info api.JobInfo
	err := n.onLeader(ctx, req.Forwarded, api.MethodHeartbeat, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, &info,
		func(ctx context.Context) error {
			var m *autoscale.Metric
			if x := req.Metrics; x != nil {
				m = &autoscale.Metric{BatchTime: x.BatchTimeSeconds, ResultQueue: x.ResultQueue, Stall: x.Stall, Batches: x.Batches, Workers: x.Workers}
				if err := m.Validate(); err != nil {
					return transport.Errorf(transport.ErrInvalid, "heartbeat of %q: %v", req.Consumer, err)
				}
			}
			attaching := !n.raft.HasConsumer(req.Job, req.Consumer)
			if p := principal(ctx); !p.Privileged() && attaching {
				release, err := n.reserveQuota(ctx, p, req.Job, growth{consumer: true})
				if err != nil {
					return err // a new consumer, attaching by its heartbeat
				}
				defer release()
			}
			if _, err := n.raft.Apply(ctx, n.quotaGuard(principal(ctx), n.clusterProtocol(), fsm.NewHeartbeat(req.Job, req.Consumer, m))); err != nil {
				return err
			}
			if req.Report {
				if _, err := n.raft.Apply(ctx, fsm.NewReportRound(req.Job, req.Index, req.Round)); err != nil {
					return err
				}
			}
			view, ok := n.raft.Job(req.Job)
			if !ok {
				return transport.Errorf(transport.ErrNotFound, "job %q not found", req.Job)
			}
			info = n.jobInfo(view)
			if attaching {
				// The attach answers the consumer's capability; a renewal,
				// which anyone of the tenant may send, does not.
				var err error
				info.Capability, err = n.capabilityFor(ctx, info.Tenant, req.Job, req.Consumer)
				return err
			}
			return nil
		})
	return info, err
}

func (n *Node) detach(ctx context.Context, req api.JobRequest) error {
	return n.onLeader(ctx, req.Forwarded, api.MethodDetach, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, nil,
		func(ctx context.Context) error {
			_, err := n.raft.Apply(ctx, fsm.NewDetachConsumer(req.Job, req.Consumer))
			return err
		})
}

// Jobs lists every job, as the leader knows them (a client asking
// jobs.list gets its tenant's only; in process, every tenant's).
func (n *Node) Jobs(ctx context.Context) ([]api.JobInfo, error) { return n.jobs(ctx, false) }

func (n *Node) jobs(ctx context.Context, forwarded bool) ([]api.JobInfo, error) {
	var out []api.JobInfo
	err := n.onLeader(ctx, forwarded, api.MethodJobs, func(fwd bool) any { return api.JobRequest{Forwarded: fwd} }, &out,
		func(ctx context.Context) error {
			out = nil
			p := principal(ctx)
			for _, v := range n.raft.Jobs() {
				if v.Group {
					continue // a share group is bookkeeping; its jobs show its progress
				}
				if !p.MayActOn(fsm.TenantOf(v.Owner)) {
					continue // another tenant's: not even its name
				}
				out = append(out, n.jobInfo(v))
			}
			n.addShareSummaries(ctx, out)
			return nil
		})
	return out, err
}

// jobGet reads a job and its dataset spec on the leader. A miss is answered
// only once the leader's state machine has applied everything committed
// before the request (a Barrier): a leader reads its own FSM, which after an
// election (or a leadership transfer) can still lack entries the previous
// leader committed, such as the CreateJob a client has just been told
// about. The Barrier runs on a miss only; if it cannot commit (no quorum,
// leadership lost) the request is retried like any other and ends in
// ErrNoQuorum, never in a not-found the leader could not vouch for.
func (n *Node) jobGet(ctx context.Context, req api.JobRequest) (api.JobGetResponse, error) {
	var resp api.JobGetResponse
	err := n.onLeader(ctx, req.Forwarded, api.MethodJobGet, func(fwd bool) any { r := req; r.Forwarded = fwd; return r }, &resp,
		func(ctx context.Context) error {
			var err error
			p := principal(ctx)
			resp, err = n.jobGetFor(p, req.Job)
			if !errors.Is(err, transport.ErrNotFound) {
				return err
			}
			if h := n.cfg.OnLeaderCatchUp; h != nil {
				h(req.Job)
			}
			if err := n.raft.Barrier(ctx); err != nil {
				return fmt.Errorf("job %q not in this leader's state; catching up with the log before answering: %w", req.Job, err)
			}
			resp, err = n.jobGetFor(p, req.Job) // a job the barrier brought in is checked as well
			return err
		})
	return resp, err
}

// jobGetFor reads job and its dataset from this node's FSM for p: a
// job p may not see (another tenant's, a share group) is answered
// exactly as one that does not exist, after the same Barrier (jobGet),
// so that job.get is no oracle of other tenants' job names.
func (n *Node) jobGetFor(p api.Principal, job string) (api.JobGetResponse, error) {
	view, ok := n.raft.Job(job)
	if !ok || view.Group || !n.visibleJob(p, job) {
		return api.JobGetResponse{}, transport.Errorf(transport.ErrNotFound, "job %q not found", job)
	}
	d, ok := n.raft.Dataset(view.Fingerprint)
	if !ok {
		return api.JobGetResponse{}, transport.Errorf(transport.ErrNotFound, "job %q: dataset %s not found", job, view.Fingerprint)
	}
	return api.JobGetResponse{Job: n.jobInfo(view), Spec: d.Spec}, nil
}

// LocalJobs lists the jobs as this node's own replica of the cluster state
// has them, asking no other node: it may lag the leader by what this node
// has not applied yet, and it carries no sharing counters. For metrics and
// the status page, which must answer without a quorum.
func (n *Node) LocalJobs() []api.JobInfo {
	var out []api.JobInfo
	for _, v := range n.raft.Jobs() {
		if !v.Group {
			out = append(out, n.jobInfo(v))
		}
	}
	return out
}
