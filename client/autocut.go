package client

import (
	"context"
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client/offload"
	"github.com/feedmesh/feedmesh/pipeline"
)

// Offload auto's "which ops" (FastFlow's partial offload): a cut of the
// pipeline chosen from a profile, before the job exists (autoCut) or while
// it runs (tryCut). cut.go runs the ops after the cut.

// tryCut cuts the running job when its profile (the host's per-op rates,
// the link as measured while the nodes delivered) predicts a cut that
// beats the decision without one (cutFromProfile); the nodes' first
// measurement may not have measured the link (nodes behind a slow link
// deliver little in AutoRemoteProfileTime), so each revision tries again.
func (it *Iterator) tryCut(ctx context.Context, prof OffloadProfile) bool {
	if r := it.off; r.local == nil || r.local.retiring() || it.track == nil || it.cut.Load() != nil || len(r.spec.Cuts()) == 0 {
		return false // nothing to cut, or cut already
	}
	best, reason, ok := it.c.cutFromProfile(ctx, it.off.spec, prof, "this job's profile (the host's ops, the nodes' link)", 0)
	return ok && it.cutMidJob(ctx, prof, best, reason)
}

// cutMidJob (tryCut's) cuts the running job (offload auto's "which ops" for a job
// whose pipeline this host had no profile of when it started): it opens
// the suffix (the batches already made by the whole pipeline pass through
// it), asks the cluster to cut the job, so that the splits leased from
// then on run the prefix on the nodes, and retires the local worker (a
// cut runs none beside it: the host's CPUs run the suffix), whose
// unfinished splits the nodes read again, cut. False when the job was not
// cut; the iteration goes on as before.
func (it *Iterator) cutMidJob(ctx context.Context, p OffloadProfile, best offload.CutChoice, reason string) bool {
	r := it.off
	it.mu.Lock()
	n := len(it.info.Consumers)
	it.mu.Unlock()
	if n != 1 {
		// The cluster would refuse (only a job's only consumer cuts it),
		// and an open suffix would then stay for nothing.
		it.logger().Info("offload auto: not cutting the job: it has other consumers", "job", it.job, "consumers", n)
		return false
	}
	if err := it.openCut(r.spec, best.Cut); err != nil {
		it.logger().Warn("offload auto: opening the ops after the cut failed; not cutting", "job", it.job, "cut", best.Cut, "err", err)
		return false
	}
	req := api.OffloadRequest{Job: it.job, Consumer: it.consumer, Remote: "on", Cut: best.Cut}
	if err := it.c.call(ctx, api.MethodOffload, req, nil); err != nil {
		// The suffix stays open: if the cut did commit (only its answer
		// was lost), the nodes' cut elements go through it.
		it.logger().Warn("offload auto: cutting the job failed; going on without a cut", "job", it.job, "cut", best.Cut, "err", err)
		return false
	}
	r.remoteOn.Store(true)
	it.mu.Lock()
	r.mode, r.cut, r.reason, r.profile, r.fromCache, r.predicted = jobspec.OffloadRemote, best.Cut, reason, &p, false, best.Rate
	r.since, r.rowsAt = time.Now(), it.stats.Rows
	it.mu.Unlock()
	// The local worker goes on, held to nothing, until the suffix makes
	// more than it did: the batches the nodes made whole, already on
	// their way over what may be a slow link, arrive first.
	r.gate.setFree(localShareOf(offload.Decision{Offload: true, Fraction: 0.5}))
	if it.decided.Load() {
		it.logger().Info("offload auto: cut the job while it runs; the nodes run the ops before the cut, this client the rest", "job", it.job, "cut", best.Cut, "predicted", best.Rate)
	} else {
		it.logDecision()
	}
	it.awaitSuffix(ctx, p.Local)
	r.gate.set(0)
	r.local.retire()
	return true
}

// awaitSuffix waits until the suffix makes more than local rows a second
// (over half a second), or cutWarmUp passes.
func (it *Iterator) awaitSuffix(ctx context.Context, local float64) {
	r := it.cut.Load()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(cutWarmUp)
	type mark struct {
		at   time.Time
		rows int64
	}
	var marks []mark
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := mark{time.Now(), r.rows.Load()}
		marks = append(marks, now)
		for len(marks) > 1 && now.at.Sub(marks[0].at) > 500*time.Millisecond {
			marks = marks[1:]
		}
		if el := now.at.Sub(marks[0].at); el >= 400*time.Millisecond && float64(now.rows-marks[0].rows)/el.Seconds() > local {
			return
		}
	}
}

// cutWarmUp bounds how long a local worker runs beside a cut made while
// the job runs (awaitSuffix).
const cutWarmUp = 10 * time.Second

// autoCut is offload auto's "which ops" for a job that does not exist
// yet, decided before the job is created because the cut is the job's
// (every consumer runs the same suffix; a job that exists keeps its cut,
// or its lack of one, and a consumer adopts it: adopt.go): from this
// host's remembered profile of the pipeline (per-op times and bytes, the
// link's measured throughput), the best cut (offload.BestCut) is taken
// when it predicts more than the threshold over the best decision without
// one (offload.Decide on the same profile): a partial offload runs no
// local worker beside it.
//
// 0 is no cut: auto goes on as without one (and a first job of the
// pipeline, which has no profile, runs without one and records it).
func (c *Client) autoCut(ctx context.Context, spec *pipeline.Spec) (cut int, predicted float64, reason string) {
	fp, err := spec.Fingerprint()
	if err != nil {
		return 0, 0, ""
	}
	prof, ok := c.profiles.load(fp)
	if !ok {
		return 0, 0, ""
	}
	best, reason, ok := c.cutFromProfile(ctx, spec, prof, "this host's profile of the pipeline", 0)
	if !ok {
		return 0, 0, ""
	}
	return best.Cut, best.Rate, reason
}

// cutFromProfile is the best cut of spec for a profile (per-op times and
// bytes, the link's measured throughput, the training loop's rate) on
// the live nodes, when it predicts more than the threshold over both the
// best decision without one (offload.Decide on the same profile) and the
// nodes running the whole pipeline on the same model as the cut
// (offload.WholeRate), and its suffix runs in this process; with the
// reason, which names where the profile came from. The second bound
// keeps the comparison like for like: the cut's rate counts every node
// at the spec's parallelism, and so must what it is compared with (the
// decision without a cut estimates the nodes from the host's rate per
// core). Without it, nodes that share the host's CPUs were cut, shipping
// single elements, on a prediction of 3x what they then read (issue 42).
func (c *Client) cutFromProfile(ctx context.Context, spec *pipeline.Spec, prof OffloadProfile, from string, minGain float64) (offload.CutChoice, string, bool) {
	if len(prof.Ops) != len(spec.Ops) || !(prof.LinkBytesPerSecond > 0) {
		return offload.CutChoice{}, "", false
	}
	nodes := c.liveWorkerNodes(ctx)
	cfg := offload.DefaultConfig()
	env := offload.CutEnv{Ingest: prof.Ingest, Nodes: nodes, LinkBytesPerSecond: prof.LinkBytesPerSecond, Allowed: spec.Cuts()}
	best, ok := offload.BestCut(prof.Ops, env)
	if !ok {
		return offload.CutChoice{}, "", false
	}
	without, err := offload.Decide(autoProfile(prof), cfg)
	whole := offload.WholeRate(prof.Ops, env)
	if err != nil || best.Rate <= max(without.Predicted, whole)*max(minGain, 1+cfg.SpeedUp) {
		return offload.CutChoice{}, "", false
	}
	if suffixRunsHere(spec, best.Cut) != nil {
		return offload.CutChoice{}, "", false
	}
	return best, fmt.Sprintf("auto: cut after %d ops, from %s: the nodes run the ops before it (%.4g elements/s on %d nodes) and ship %.4g bytes an element over a link measured at %.4g bytes/s (%.4g elements/s), this client runs the rest (%.4g/s): %.4g elements/s predicted, against %.4g without a cut (%.4g with the nodes running every op)",
		best.Cut, from, best.Remote, nodes, prof.Ops[best.Cut-1].Bytes, prof.LinkBytesPerSecond, best.Wire, best.Suffix, best.Rate, without.Predicted, whole), true
}
