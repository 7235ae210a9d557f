package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
)

// Offload (JobOptions.Offload): where a DYNAMIC job's pipeline runs for
// this consumer. remote: the nodes prepare everything (as before offload
// existed); local: a local worker in this process prepares everything and
// the nodes take no split; a fraction: the local worker prepares that
// share of the batches, the nodes the rest; auto: the client profiles and
// decides (autooffload.go). localworker.go has the local worker.

// OffloadStats is what the iterator's offload did (Stats.Offload).
type OffloadStats struct {
	// Requested is JobOptions.Offload as given (auto when empty).
	Requested string `json:"requested"`
	// Mode is the decision in force: remote, local or fraction=F.
	Mode string `json:"mode"`
	// Fraction is the local worker's target share of the batches.
	Fraction float64 `json:"fraction"`
	// Cut is the offload boundary in force (0: none).
	Cut int `json:"cut,omitempty"`
	// LocalCPUs is the local worker's CPU budget, and LocalCPUsFrom where
	// it came from (JobOptions.LocalCPUs, or measured spare CPUs).
	LocalCPUs     float64 `json:"local_cpus"`
	LocalCPUsFrom string  `json:"local_cpus_from"`
	// Reason says why this mode (auto's decision, or a fallback).
	Reason string `json:"reason"`
	// LocalBatches and RemoteBatches count what each side prepared;
	// LocalShare is LocalBatches over both.
	LocalBatches  int64   `json:"local_batches"`
	RemoteBatches int64   `json:"remote_batches"`
	LocalShare    float64 `json:"local_share"`
	// Profile is what auto measured (nil otherwise); FromCache: it was
	// remembered from an earlier run on this host, in the file
	// Options.OffloadProfiles names.
	Profile   *OffloadProfile `json:"profile,omitempty"`
	FromCache bool            `json:"from_cache,omitempty"`
	// Predicted is the training loop's rate (rows per second) the
	// decision expected; Measured the rate since the decision.
	Predicted float64 `json:"predicted_rows_per_second,omitempty"`
	Measured  float64 `json:"measured_rows_per_second"`
}

// offloadRun is an iterator's offload: the decision and the local worker.
type offloadRun struct {
	requested string
	cores     float64
	coresFrom string
	dynamic   bool // the job may have a local worker (DYNAMIC, no share, not coordinated)

	gate     *fractionGate
	local    *localWorker // nil: remote
	meters   offloadMeters
	remoteOn atomic.Bool // auto turned the nodes on

	spec     *pipeline.Spec
	fraction float64 // the local share to start with

	// guarded by the Iterator's mu
	mode      string
	cut       int
	reason    string
	profile   *OffloadProfile
	fromCache bool
	predicted float64
	since     time.Time // the decision's time
	rowsAt    int64     // Stats.Rows then
}

// ErrOffloadOptions marks a Distribute error in the offload options
// (Offload, LocalCPUs, OffloadBoundary) that this client cannot run: a
// budget of 0 with local, a cut the spec does not have, a pipeline whose
// ops this process lacks.
var ErrOffloadOptions = errors.New("offload options")

// offloadPlan resolves a consumer's offload before the job is joined:
// the mode, the local CPU budget, and whether the pipeline runs here.
// An error is the user's (a bad mode, a budget of 0 with local, a
// pipeline that cannot run in the client); auto falls back to remote with
// the reason instead.
func offloadPlan(spec *pipeline.Spec, n jobspec.Normalized) (*offloadRun, float64, error) {
	o, c := n.Job(), n.Consumer()
	mode, frac := c.Offload(), c.Fraction()
	r := &offloadRun{requested: mode, mode: mode,
		dynamic: o.Sharding() == jobspec.Dynamic && !o.Share() && !o.Coordinated()}
	if cut := o.OffloadBoundary(); cut > 0 {
		// Normalize refused the local modes and at-most-once with a cut.
		if err := spec.CheckCut(cut); err != nil {
			return nil, 0, err
		}
		if err := suffixRunsHere(spec, cut); err != nil {
			return nil, 0, fmt.Errorf("offload_boundary %d: the ops after the cut run in the client, and the pipeline cannot run here (an op registered only in the node binary?): %w", cut, err)
		}
		r.mode, r.cut = jobspec.OffloadRemote, cut
		r.reason = fmt.Sprintf("offload_boundary %d: the nodes run the source and ops [0, %d) and ship single elements; this client runs ops [%d, %d)", cut, cut, cut, len(spec.Ops))
		return r, 0, nil
	}
	if mode == jobspec.OffloadRemote {
		r.reason = "offload remote: the nodes prepare everything"
		return r, 0, nil
	}
	if api.SpecFeatures(spec).Deterministic {
		// The composition table refused the local modes.
		r.mode, r.reason = jobspec.OffloadRemote, "auto: remote under deterministic order (a local worker and a cut are not wired for it yet)"
		return r, 0, nil
	}
	if !r.dynamic {
		// Normalize refused the fixed modes; auto says why it stays remote.
		r.mode, r.reason = jobspec.OffloadRemote, fmt.Sprintf("auto: remote, since a local worker needs sharding dynamic without share or coordinated reads (sharding %s)", o.Sharding())
		return r, 0, nil
	}
	if mode == jobspec.OffloadAuto && o.Delivery() != jobspec.ExactlyOnce {
		// Auto retires its local worker when another consumer joins the
		// job; only exactly-once hands a retired worker's splits on.
		r.mode, r.reason = jobspec.OffloadRemote, "auto: remote under at-most-once delivery (a local worker retired when another consumer joins would lose its splits; ask for local or a fraction to run one)"
		return r, 0, nil
	}
	if c.Resume() != nil && mode == jobspec.OffloadAuto {
		r.mode, r.reason = jobspec.OffloadRemote, "auto: remote while resuming from a checkpoint (the local worker is not profiled then)"
		return r, 0, nil
	}
	r.cores, r.coresFrom = c.LocalCPUs(), "JobOptions.LocalCPUs"
	if r.cores == 0 {
		r.cores, r.coresFrom = spareCPUs()
	}
	if r.cores < minLocalCPUs {
		if mode != jobspec.OffloadAuto {
			return nil, 0, fmt.Errorf("offload %s: the local CPU budget is %.2g cores (%s): nothing to run a local worker with; set JobOptions.LocalCPUs, or use offload remote", mode, r.cores, r.coresFrom)
		}
		r.mode, r.reason = jobspec.OffloadRemote, fmt.Sprintf("auto: remote, the host has no spare CPU (%.2g cores, %s)", r.cores, r.coresFrom)
		return r, 0, nil
	}
	if err := runsHere(spec); err != nil {
		if mode != jobspec.OffloadAuto {
			return nil, 0, fmt.Errorf("offload %s: the pipeline cannot run in the client (an op registered only in the node binary?): %w; use offload remote", mode, err)
		}
		r.mode, r.reason = jobspec.OffloadRemote, fmt.Sprintf("auto: remote, the pipeline cannot run in the client: %v", err)
		return r, 0, nil
	}
	if mode == jobspec.OffloadAuto {
		r.reason = "auto: profiling the pipeline and the training loop on this host (the nodes off meanwhile)"
		return r, 1, nil
	}
	r.reason = fmt.Sprintf("offload %s: the local worker prepares %.0f %% of the batches", mode, 100*frac)
	return r, frac, nil
}

// checkLocalCensus refuses an at-most-once DYNAMIC job with an offload
// fraction in a cluster below api.ProtocolLocalCensus (a rolling upgrade
// from an older release): its local worker holds one of the job's worker
// slots and would be leased no census, so once its node workers died the
// job would wait for ever for a node to count what they lost.
func (c *Client) checkLocalCensus(ctx context.Context, n jobspec.Normalized) error {
	o, mode := n.Job(), n.Consumer().Offload()
	if o.Sharding() != jobspec.Dynamic || o.Delivery() != jobspec.AtMostOnce || o.Share() || o.Coordinated() ||
		mode == jobspec.OffloadAuto || mode == jobspec.OffloadRemote || mode == jobspec.OffloadLocal {
		return nil
	}
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("offload fraction with delivery at-most-once: the cluster's protocol level: %w", err)
	}
	if st.Protocol < api.ProtocolLocalCensus {
		return fmt.Errorf("offload fraction %.2g with delivery at-most-once needs every Raft server at protocol level %d (the cluster is at %d: a rolling upgrade?), where the local worker counts a dead node's loss itself: use exactly-once, or offload local or remote, until then", n.Consumer().Fraction(), api.ProtocolLocalCensus, st.Protocol)
	}
	return nil
}

// minLocalCPUs is the least budget a local worker runs with.
const minLocalCPUs = 0.05

// startOffload asks the cluster for the local worker (and, for local or
// auto's profiling, to keep the nodes off the job) once the consumer is
// attached.
func (c *Client) startOffload(ctx context.Context, info api.JobInfo, consumer string, r *offloadRun, fraction float64) error {
	if r == nil || !r.dynamic {
		return nil
	}
	if r.requested == jobspec.OffloadAuto && r.mode != jobspec.OffloadRemote && len(info.Consumers) > 1 {
		r.mode, r.reason = jobspec.OffloadRemote, autoSeveralConsumers(len(info.Consumers))
	}
	// A consumer that wants the nodes turns them on (another consumer's
	// offload local may have turned them off).
	req := api.OffloadRequest{Job: info.Name, Consumer: consumer, LocalWorker: r.mode != jobspec.OffloadRemote, Remote: "on"}
	if fraction >= 1 && r.mode != jobspec.OffloadRemote {
		req.Remote = "off"
	}
	if err := c.call(ctx, api.MethodOffload, req, nil); err != nil {
		return fmt.Errorf("offload %s: start the local worker: %w", r.requested, err)
	}
	return nil
}

// autoSeveralConsumers is offload auto's reason to stay remote, or to
// retire its local worker, in a job with n consumers: a local worker's
// batches reach only its own consumer, so ranks that read in lock step
// (data-parallel trainers) would wait on each other at the end of the
// data while it holds splits, and the shares of the ranks would differ.
func autoSeveralConsumers(n int) string {
	return fmt.Sprintf("auto: remote, the job has %d consumers (a local worker's batches would reach this one only)", n)
}

// retireLocalIfShared retires offload auto's local worker once the job
// has another consumer (autoSeveralConsumers says why): the consumer
// reads on from the nodes, which read what the local worker held.
func (it *Iterator) retireLocalIfShared(info api.JobInfo) {
	r := it.off
	if r == nil || r.local == nil || r.requested != jobspec.OffloadAuto || len(info.Consumers) < 2 || r.local.retiring() {
		return
	}
	it.mu.Lock()
	r.mode, r.reason = jobspec.OffloadRemote, autoSeveralConsumers(len(info.Consumers))
	r.since, r.rowsAt = time.Now(), it.stats.Rows
	it.mu.Unlock()
	r.gate.set(0)
	r.local.retire()
	it.logger().Info("offload auto: another consumer joined the job; retiring the local worker, the nodes read on", "job", it.job, "consumers", len(info.Consumers))
}

// DecisionKey is the attribute that marks the client's log line of a
// job's offload and workers decision (INFO, once per iterator): a handler
// that shows WARN and above can show that line too (`feedmesh read`, the
// Python package's log at its default level).
const DecisionKey = "decision"

// logDecision logs, once, the iterator's offload and workers decision in
// one line at INFO, marked with DecisionKey: at Distribute for a fixed
// mode (or auto's fallback), once auto has decided for auto (its later
// revisions log lines of their own).
func (it *Iterator) logDecision() {
	if it.decided.Swap(true) {
		return
	}
	it.mu.Lock()
	o := it.info.Options
	serving := 0
	for _, w := range it.info.Workers {
		if _, local := w.LocalWorker(); !local && !w.Expired && !w.Drained && !w.Dismissed {
			serving++
		}
	}
	mode, reason, cut := "remote", "", 0
	if r := it.off; r != nil {
		mode, reason, cut = r.mode, r.reason, r.cut
	}
	it.mu.Unlock()
	workers := string(o.Workers)
	switch jobspec.Workers(workers) {
	case jobspec.AllWorkers:
		workers = "all (every live node)"
	case jobspec.AutoWorkers:
		workers = "auto (the cluster adds workers while they help)"
	}
	if cut > 0 {
		mode = fmt.Sprintf("%s, cut after %d ops", mode, cut)
	}
	it.logger().Info(fmt.Sprintf("job %q: offload %s; workers %s", it.job, mode, workers),
		DecisionKey, true, "job", it.job, "offload", mode, "workers", o.Workers, "serving", serving, "reason", reason)
}

// localName is the iterator's local worker's name ("" without one).
func (r *offloadRun) localName() string {
	if r == nil || r.local == nil {
		return ""
	}
	return r.local.name
}

// fill writes the offload's figures into s (the Iterator's mu held).
func (r *offloadRun) fill(s *Stats, now time.Time) {
	if r == nil {
		return
	}
	o := &OffloadStats{Requested: r.requested, Mode: r.mode, Cut: r.cut, LocalCPUs: r.cores, LocalCPUsFrom: r.coresFrom,
		Reason: r.reason, Profile: r.profile, FromCache: r.fromCache, Predicted: r.predicted}
	if r.gate != nil {
		o.LocalBatches, o.RemoteBatches, o.Fraction = r.gate.counts()
		if t := o.LocalBatches + o.RemoteBatches; t > 0 {
			o.LocalShare = float64(o.LocalBatches) / float64(t)
		}
	}
	if !r.since.IsZero() {
		if d := now.Sub(r.since).Seconds(); d >= 1 { // a shorter window measures bursts
			o.Measured = float64(s.Rows-r.rowsAt) / d
		}
	}
	s.Offload = o
}

// report is the offload as `feedmesh jobs` shows it.
func (r *offloadRun) report(s Stats) *api.OffloadReport {
	o := s.Offload
	if o == nil {
		return nil
	}
	return &api.OffloadReport{Mode: o.Mode, Fraction: o.Fraction, Cut: o.Cut, Predicted: o.Predicted, Measured: o.Measured,
		Local: o.LocalBatches, Remote: o.RemoteBatches, Stall: min(max(s.RecentStallFraction, 0), 1), Reason: o.Reason}
}

// offloadReportInterval is how often a consumer with a local worker
// reports its offload to the cluster.
const offloadReportInterval = 2 * time.Second

// reportOffload sends the offload report at once (the mode and its
// reason are known from the start), then every offloadReportInterval
// until ctx ends (best effort: `feedmesh jobs` shows the last one).
func (it *Iterator) reportOffload(ctx context.Context) {
	t := time.NewTicker(offloadReportInterval)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		rep := it.off.report(it.Stats())
		if rep == nil {
			continue
		}
		if err := it.c.call(ctx, api.MethodOffload, api.OffloadRequest{Job: it.job, Consumer: it.consumer, Report: rep}, nil); err != nil && ctx.Err() == nil {
			it.logger().Debug("offload report", "job", it.job, "err", err)
		}
	}
}

// remoteServing reports whether a node serves the job as last heard: a
// worker that is not a local worker, not expired and not drained, with
// the nodes' part on.
func remoteServing(info api.JobInfo) bool {
	if info.RemoteOff {
		return false
	}
	for _, w := range info.Workers {
		if _, local := jobspec.LocalWorkerOf(w.Name); !local && !w.Expired && !w.Drained {
			return true
		}
	}
	return false
}

// leasedOut reports whether every split of every epoch of the job is
// leased, as last heard: the nodes then have only what they hold to
// finish, and a local worker held to its share until they deliver more
// would wait for ever with elements of its own splits in its pipeline (a
// bucket's partial batches), which the job needs to end. The share gate
// lets it go on then (its next lease ends its phase, and the pipeline
// flushes).
func leasedOut(info api.JobInfo) bool {
	e := info.Options.Epochs
	return e > 0 && info.NumSplits > 0 && info.Leased >= info.NumSplits*e
}

// runsHere checks that spec compiles in this process: every op it names
// is registered here (ops registered only in the node binary are not).
func runsHere(spec *pipeline.Spec) error {
	it, err := pipeline.OpenWithOptions(context.Background(), spec, []pipeline.Split{}, pipeline.Options{DisableStats: true})
	if err != nil {
		return err
	}
	return it.Close()
}

// suffixRunsHere checks that the ops after spec's cut open in this
// process (pipeline.OpenSuffix, over no element).
func suffixRunsHere(spec *pipeline.Spec, cut int) error {
	it, err := pipeline.OpenSuffix(context.Background(), spec, cut, func(context.Context) (pipeline.CutElement, error) {
		return pipeline.CutElement{}, io.EOF
	}, pipeline.Options{DisableStats: true})
	if err != nil {
		return err
	}
	return it.Close()
}

// withSpec keeps what the local worker will run.
func (r *offloadRun) withSpec(spec *pipeline.Spec, fraction float64) *offloadRun {
	if r != nil {
		r.spec, r.fraction = spec, fraction
	}
	return r
}

// Local worker defaults: splits per lease, how often it reports produced
// splits and asks again when nothing is leasable, and how many batches
// it may run ahead of its share.
const (
	localLeaseSplits = 8
	localPoll        = 100 * time.Millisecond
	localSlack       = 2
)

// startLocal creates the plain engine's local worker (it runs under the
// engine's run) and the offload's reporting, when the offload has one.
func (it *Iterator) startLocal(p *plain) {
	r := it.off
	if r == nil || r.mode == jobspec.OffloadRemote {
		return
	}
	r.gate = newFractionGate(r.fraction, localSlack, func() bool {
		it.mu.Lock()
		defer it.mu.Unlock()
		return remoteServing(it.info) && !leasedOut(it.info)
	}, func() bool {
		it.mu.Lock()
		defer it.mu.Unlock()
		return it.info.State != "" && it.info.State != api.JobRunning
	})
	cfg := localConfig{job: it.job, consumer: it.consumer, jobID: it.jobID, spec: r.spec, exact: it.info.Tracks(), batched: r.spec.Batched(),
		cores: r.cores, leaseSplits: localLeaseSplits, poll: localPoll}
	w, err := newLocalWorker(cfg, it, it.ledger, r.gate)
	if err != nil {
		r.mode, r.reason = jobspec.OffloadRemote, fmt.Sprintf("%s; fell back to remote: %v", r.reason, err)
		r.gate = nil
		it.logDecision()
		return
	}
	r.local, p.local = w, w
	r.since = time.Now()
	if r.requested != jobspec.OffloadAuto {
		r.mode = jobspec.FractionMode(r.fraction)
		if r.fraction >= 1 {
			r.mode = jobspec.OffloadLocal
		}
	}
	w.blocked = &r.meters.localBlocked
	it.wg.Add(1)
	go func() {
		defer it.wg.Done()
		it.reportOffload(it.ctx)
	}()
	if r.requested != jobspec.OffloadAuto {
		it.logDecision()
	}
	if r.requested == jobspec.OffloadAuto {
		fp, _ := r.spec.Fingerprint()
		it.wg.Add(1)
		go func() {
			defer it.wg.Done()
			it.runAuto(it.ctx, fp)
		}()
	}
}

// call is a control request through the client (the local worker's).
func (it *Iterator) call(ctx context.Context, method string, req, resp any) error {
	return it.c.call(ctx, method, req, resp)
}

// offGate is the share gate of the iterator's local worker, or nil.
func (it *Iterator) offGate() *fractionGate {
	if it.off == nil {
		return nil
	}
	return it.off.gate
}
