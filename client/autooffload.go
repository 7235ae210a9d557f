package client

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client/offload"
)

// Offload auto, after FastFlow: profile, decide when and how much, and
// revise while the job runs. The deciding is client/offload's (pure):
// this file goes through the steps and applies the decisions;
// automeasure.go measures, autocut.go cuts.
//
//  1. Profile (unless this host remembers the pipeline: profilecache.go):
//     the local worker alone prepares everything, the nodes off, for
//     AutoProfileRows rows or AutoProfileTime. Measured: the training
//     loop's rate with data ready (rows over the loop's own time between
//     calls to Next: the stall meter's work) and the local worker's
//     capacity (its rows over the time it was not held back by a full
//     buffer).
//  2. Decide (offload.Decide): no stall worth 10 % → everything local,
//     the nodes are never turned on (their CPUs saved); else the nodes
//     are turned on and measured for AutoProfileRows rows or
//     AutoRemoteProfileTime, the local worker going on meanwhile held to
//     nothing, and the local worker then keeps the share the decision
//     leaves it (or, when neither side covers the loop alone, both run
//     at capacity). Until measured, the nodes' rate is estimated: the
//     local rate per core times the job's live nodes.
//  3. Check (once per job): a decision that runs the local worker beside
//     the nodes predicts the sum of the two sides' rates, the host's
//     measured alone; when the rate into the loop, measured over the
//     nodes' profile or a later interval, falls more than AutoMissMargin
//     below that prediction, the sides share what the model does not see
//     (the host's CPUs, when the nodes run on the trainer's host), and
//     the nodes alone are measured for AutoTrialTime, the local worker
//     held to nothing. If they read at least 1 − Hysteresis (95 %) of what
//     both sides did, the local worker is retired and the nodes prepare
//     everything from then on; otherwise the decision stands.
//  4. Revise every AutoReviseInterval from the rates of the last
//     interval (offload.Revise, with hysteresis), so that a node that
//     dies or joins moves the local share.

// Offload auto's bounds.
const (
	AutoProfileRows = 300
	AutoProfileTime = 10 * time.Second
	// AutoRemoteProfileTime bounds the nodes' profile: nodes behind a
	// slow link may take far longer than the host for AutoProfileRows.
	AutoRemoteProfileTime = 2 * time.Second
	AutoReviseInterval    = 2 * time.Second
	// autoEarlyRows and autoEarlyGain end the host's profile early when
	// a cut is clear: after this many rows, a cut predicting this many
	// times the rate without one.
	autoEarlyRows = 100
	autoEarlyGain = 2.0
	// autoShareBounds keep both sides running while offloading, so that
	// each one's rate can be measured for the next revision.
	autoMinShare, autoMaxShare = 0.05, 0.95
	// AutoRemoteProfileSettle and AutoRemoteProfileMin: the nodes' profile
	// starts this long after they are turned on (their first leases and
	// pipelines' start) and lasts at least this long, so that a fast
	// pipeline's 300 rows (a tenth of a second) do not make it.
	AutoRemoteProfileSettle = 250 * time.Millisecond
	AutoRemoteProfileMin    = time.Second
	// AutoMissMargin: a decision that runs the local worker beside the
	// nodes is checked (step 3) when the rate into the loop falls more
	// than this far below the rate it predicted. 25 %: well above what
	// the decision misses by where the two sides have resources of their
	// own (3-8 % in feedmesh-bench offload), well below what it misses by
	// on nodes that share the host's CPUs (35-60 %).
	AutoMissMargin = 0.25
	// AutoTrialSettle and AutoTrialTime: the check measures the nodes
	// alone for AutoTrialTime, from AutoTrialSettle after the local worker
	// is held (its batches in flight arrive meanwhile).
	AutoTrialSettle = 500 * time.Millisecond
	AutoTrialTime   = 2 * time.Second
)

// missed reports whether a rate measured falls more than AutoMissMargin
// below the rate predicted (pure).
func missed(predicted, measured float64) bool {
	return predicted > 0 && measured > 0 && measured < predicted*(1-AutoMissMargin)
}

// OffloadProfile is what offload auto measured, in rows (elements) per
// second into the training loop.
type OffloadProfile struct {
	// Ingest is the training loop's rate with data always ready: rows
	// over the loop's own time between calls to Next.
	Ingest float64 `json:"ingest_rows_per_second"`
	// Local is the local worker's rate within the CPU budget, alone.
	Local float64 `json:"local_rows_per_second"`
	// Remote is the nodes' rate: estimated until measured.
	Remote         float64 `json:"remote_rows_per_second,omitempty"`
	RemoteMeasured bool    `json:"remote_measured,omitempty"`
	// Rows is how many rows the profile measured, and Rate the rows per
	// second that reached the training loop meanwhile (both sides).
	Rows int64   `json:"rows"`
	Rate float64 `json:"rows_per_second,omitempty"`
	// Ops are the pipeline's ops as the local worker ran them (the time
	// an element spends in each, the spec's parallelism, what an element
	// weighs after it), and LinkBytesPerSecond what the nodes' batches
	// carried per second while they were measured and not held back: at
	// least the link's throughput, exactly it when the link bounds them.
	// A later job of the pipeline chooses a cut from them (autoCut).
	Ops                []offload.OpRate `json:"ops,omitempty"`
	LinkBytesPerSecond float64          `json:"link_bytes_per_second,omitempty"`
}

// autoProfile is offload.Profile for a measured OffloadProfile: the
// whole pipeline runs on either side (cut after the last op), and an
// offloaded row costs the host OverheadRatio of running it locally
// (receiving it: small next to a pipeline worth offloading).
func autoProfile(p OffloadProfile) offload.Profile {
	return offload.Profile{Ingest: max(p.Ingest, 1e-9), Local: max(p.Local, 1e-9),
		Candidates: []offload.Candidate{{Cut: 1, Remote: max(p.Remote, 0), OverheadRatio: 0.05}}}
}

// localShareOf is the local worker's share for a decision (pure).
func localShareOf(d offload.Decision) float64 {
	if !d.Offload {
		return 1
	}
	return min(max(1-d.Fraction, autoMinShare), autoMaxShare)
}

// runAuto is offload auto's loop (the Iterator's goroutine).
func (it *Iterator) runAuto(ctx context.Context, fingerprint string) {
	prof, cached := it.c.profiles.load(fingerprint)
	if !cached {
		var ok bool
		if prof, ok = it.profileHost(ctx, fingerprint); !ok {
			return
		}
		// Which ops, from the host's per-op rates and the link probed:
		// a cut decided now is in force before any node ships a whole
		// batch over a link it may be too slow for.
		if it.tryCut(ctx, prof) {
			return
		}
	}
	d, err := offload.Decide(autoProfile(prof), offload.DefaultConfig())
	if err != nil {
		it.setAuto(prof, cached, offload.Decision{}, fmt.Sprintf("auto: local, no decision: %v", err))
		it.logDecision()
		return
	}
	checked := false
	if d.Offload && !prof.RemoteMeasured {
		var ok bool
		var both float64
		if prof, d, both, ok = it.profileNodes(ctx, fingerprint, prof, cached, d); !ok {
			return
		}
		// Which ops (FastFlow's partial offload), now that the link is
		// measured: a cut that beats the decision without one is put in
		// force at once, and the job runs it to its end.
		if it.tryCut(ctx, prof) {
			return
		}
		// Step 3 on the nodes' profile: both sides ran, each at its
		// capacity; did they make what the decision predicts?
		if d.Offload && missed(d.Predicted, both) {
			checked = true
			var done bool
			if d, done = it.checkShared(ctx, prof, cached, d, both); done {
				return
			}
		}
	}
	it.applyAuto(ctx, prof, cached, d)
	it.logDecision()
	it.reviseAuto(ctx, fingerprint, prof, d, checked)
}

// checkShared is step 3: the decision d (the local worker beside the
// nodes) predicted d.Predicted and both sides made only both rows a
// second. The nodes alone are measured; if they make at least
// 1 − Hysteresis of both, the local worker is retired (the nodes prepare
// everything from then on) and done is true. Otherwise d, its prediction
// now what was measured, is put back in force and returned (the caller's
// revisions go on from it); done is true also when ctx ended.
func (it *Iterator) checkShared(ctx context.Context, prof OffloadProfile, cached bool, d offload.Decision, both float64) (_ offload.Decision, done bool) {
	r := it.off
	if r.local.retiring() {
		return d, true
	}
	r.gate.set(0)
	it.mu.Lock()
	r.mode = "auto (checking the nodes alone)"
	it.mu.Unlock()
	it.logger().Info("offload auto: the local worker beside the nodes reads less than predicted; measuring the nodes alone",
		"job", it.job, "predicted", d.Predicted, "measured", both, "margin", AutoMissMargin)
	select {
	case <-ctx.Done():
		return d, true
	case <-time.After(AutoTrialSettle):
	}
	m, ok := it.profileFor(ctx, math.MaxInt64, AutoTrialTime)
	if !ok {
		return d, true
	}
	miss := 100 * (1 - both/d.Predicted)
	if m.Rate >= both*(1-offload.DefaultConfig().Hysteresis) {
		it.retireLocal(fmt.Sprintf("auto: remote, checked: with the local worker beside them the nodes read %.4g elements/s, %.0f %% under the %.4g predicted (more than the %.0f %% margin: the two sides share this host's CPUs, or what else the model does not see), and alone %.4g: the nodes prepare everything",
			both, miss, d.Predicted, 100*AutoMissMargin, m.Rate), m.Rate)
		return d, true
	}
	it.logger().Info("offload auto: the local worker beside the nodes reads more than the nodes alone; keeping it",
		"job", it.job, "both", both, "nodes_alone", m.Rate)
	d.Reason += fmt.Sprintf("; checked: %.4g elements/s with both sides (%.0f %% under the prediction), %.4g with the nodes alone", both, miss, m.Rate)
	d.Predicted = both // what it was measured to make
	it.applyAuto(ctx, prof, cached, d)
	return d, false
}

// tail reports whether the job is near its end as last heard: every
// split leased (leasedOut), so the rates fall as the nodes run out of
// work, and miss any prediction.
func (it *Iterator) tail() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	return leasedOut(it.info)
}

// retireLocal retires offload auto's local worker for good, the nodes on
// (they read what it held), with reason; predicted is what the nodes were
// measured to make.
func (it *Iterator) retireLocal(reason string, predicted float64) {
	r := it.off
	it.mu.Lock()
	r.mode, r.reason, r.predicted = jobspec.OffloadRemote, reason, predicted
	r.since, r.rowsAt = time.Now(), it.stats.Rows
	it.mu.Unlock()
	r.gate.set(0)
	r.local.retire()
	if it.decided.Load() {
		it.logger().Info("offload auto: "+reason, "job", it.job)
	} else {
		it.logDecision()
	}
}

// profileHost is step 1: the host's profile, stored for later jobs of
// the pipeline. False when ctx ended first.
func (it *Iterator) profileHost(ctx context.Context, fingerprint string) (OffloadProfile, bool) {
	// The link (a pipeline with cut points only) is probed while
	// the host profiles: the nodes ship nothing meanwhile.
	link := make(chan float64, 1)
	if len(it.off.spec.Cuts()) > 0 {
		go func() { link <- it.c.probeLink(ctx) }()
	} else {
		link <- 0
	}
	// The profile ends early when a cut is clear: after
	// autoEarlyRows rows, once the link is probed, if a cut predicts
	// autoEarlyGain× the rate without one (a margin no measurement
	// noise of that many rows closes).
	linkBps, probed := 0.0, false
	complete := func(m OffloadProfile) OffloadProfile {
		if st, ok := it.off.local.pipelineStats(); ok {
			m.Ops = opRates(it.off.spec, st)
		}
		m.LinkBytesPerSecond = linkBps
		m.Remote = it.estimateRemote(ctx, m)
		return m
	}
	early := func(m OffloadProfile, _ time.Duration) bool {
		if !probed {
			select {
			case linkBps = <-link:
				probed = true
			default:
				return false
			}
		}
		if m.Rows < autoEarlyRows || !(linkBps > 0) {
			return false
		}
		_, _, ok := it.c.cutFromProfile(ctx, it.off.spec, complete(m), "", autoEarlyGain)
		return ok
	}
	prof, ok := it.profileUntil(ctx, AutoProfileRows, AutoProfileTime, early)
	if !probed {
		linkBps = <-link // probeLink ends with ctx
	}
	if !ok {
		return OffloadProfile{}, false
	}
	prof = complete(prof)
	it.storeProfile(fingerprint, prof)
	return prof, true
}

// profileNodes is step 2's remote profile, for a decision d to offload
// taken on the nodes' estimated rate: it measures them and decides again.
// It also returns the rate both sides made meanwhile (rows a second into
// the loop, each side at its capacity). False when ctx ended first, or no
// decision came.
func (it *Iterator) profileNodes(ctx context.Context, fingerprint string, prof OffloadProfile, cached bool, d offload.Decision) (OffloadProfile, offload.Decision, float64, bool) {
	// Measure the nodes (FastFlow's remote profile) before sharing:
	// the estimate only said they are worth turning on. Neither
	// side is held meanwhile: the nodes' rate is theirs, and the
	// host goes on preparing what it can.
	it.applyAuto(ctx, prof, cached, offload.Decision{Offload: true, Fraction: 1, Predicted: d.Predicted,
		Reason: "profiling the nodes: " + d.Reason})
	it.off.gate.setFree(localShareOf(d))
	it.mu.Lock()
	it.off.mode = "auto (profiling the nodes)"
	it.mu.Unlock()
	select {
	case <-ctx.Done():
		return prof, d, 0, false
	case <-time.After(AutoRemoteProfileSettle):
	}
	m, ok := it.profileUntil(ctx, math.MaxInt64, AutoRemoteProfileTime, func(m OffloadProfile, el time.Duration) bool {
		return m.Rows >= AutoProfileRows && el >= AutoRemoteProfileMin
	})
	if !ok {
		return prof, d, 0, false
	}
	if m.RemoteMeasured {
		prof.Remote, prof.RemoteMeasured = m.Remote, true
		prof.LinkBytesPerSecond = max(prof.LinkBytesPerSecond, m.LinkBytesPerSecond)
		it.storeProfile(fingerprint, prof)
	}
	d, err := offload.Decide(autoProfile(prof), offload.DefaultConfig())
	if err != nil {
		return prof, d, 0, false
	}
	return prof, d, m.Rate, true
}

// reviseAuto is step 4: every AutoReviseInterval, the decision d in force
// is revised from the rates of the last interval, until ctx ends, the
// local worker retires, or a cut is put in force. Until checked, an
// interval whose rate misses d's prediction is checked first (step 3).
func (it *Iterator) reviseAuto(ctx context.Context, fingerprint string, prof OffloadProfile, d offload.Decision, checked bool) {
	t := time.NewTicker(AutoReviseInterval)
	defer t.Stop()
	last, nodes := it.offloadSnapshot(), it.servingNodes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if it.off.local.retiring() {
			return
		}
		now, n := it.offloadSnapshot(), it.servingNodes()
		window := measure(last, now)
		m := revised(prof, window, last, now, nodes, n)
		last, nodes = now, n
		if m.Rows < 1 {
			continue
		}
		if !checked && d.Offload && n == nodes && !it.tail() && missed(d.Predicted, window.Rate) {
			checked = true
			var done bool
			if d, done = it.checkShared(ctx, prof, false, d, window.Rate); done {
				return
			}
			last, nodes = it.offloadSnapshot(), it.servingNodes()
			continue
		}
		next, err := offload.Revise(d, autoProfile(m), offload.DefaultConfig())
		if moved(prof, m) {
			// A later job decides from the rates measured at work (the
			// first profile's local rate includes the pipeline's start).
			it.storeProfile(fingerprint, m)
		}
		prof = m
		if it.tryCut(ctx, prof) {
			return // a cut job runs to its end as cut
		}
		if err != nil || next == d {
			continue
		}
		d = next
		it.applyAuto(ctx, prof, false, d)
	}
}

// moved reports whether a revision's profile differs from the one
// remembered by more than 5 % in a rate or the link (pure): only then is
// it stored again.
func moved(prev, next OffloadProfile) bool {
	far := func(a, b float64) bool { return math.Abs(a-b) > 0.05*max(math.Abs(a), math.Abs(b)) }
	return far(prev.Local, next.Local) || far(prev.Remote, next.Remote) || far(prev.LinkBytesPerSecond, next.LinkBytesPerSecond) ||
		next.RemoteMeasured != prev.RemoteMeasured
}

// revised is the profile a revision decides on (pure): each side's rate
// is taken from the last window only where that side ran unhindered for
// most of it (a side held to its share, or waiting on a full buffer,
// shows its share, not its capacity: trusting it would shrink a share
// that is held small, window after window); otherwise the last known
// rate stays, the nodes' scaled by how many serve the job now.
func revised(prev, m OffloadProfile, a, b offloadSnapshot, nodesBefore, nodesNow int) OffloadProfile {
	out := prev
	out.Rows = m.Rows
	if m.Ingest > 0 && m.Ingest < 1e9 {
		out.Ingest = m.Ingest
	}
	el := b.at.Sub(a.at)
	if el <= 0 {
		return out
	}
	if m.Local > 0 && b.localBlocked-a.localBlocked < el/2 {
		out.Local = m.Local
	}
	if nodesBefore > 0 && nodesNow != nodesBefore {
		out.Remote = prev.Remote * float64(nodesNow) / float64(nodesBefore)
	} else if nodesBefore == 0 && nodesNow > 0 && prev.Remote == 0 {
		out.Remote = out.Local // a first node: as fast as the host, until measured
	}
	if m.RemoteMeasured && b.remoteBlk-a.remoteBlk < el/2 && nodesNow == nodesBefore {
		out.Remote, out.RemoteMeasured = m.Remote, true
		out.LinkBytesPerSecond = max(out.LinkBytesPerSecond, m.LinkBytesPerSecond)
	}
	return out
}

// applyAuto puts a decision in force.
func (it *Iterator) applyAuto(ctx context.Context, p OffloadProfile, cached bool, d offload.Decision) {
	if it.off.local.retiring() {
		return // remote for good (retireLocalIfShared)
	}
	share := localShareOf(d)
	// Turning the nodes off when, measured, they do not pay (a slow
	// link, say): they lease no more of the job, and what they hold is
	// read once the local worker runs out of splits (the gate holds it
	// until then).
	if on := d.Offload; on != it.off.remoteOn.Load() {
		req := api.OffloadRequest{Job: it.job, Consumer: it.consumer, Remote: "off"}
		if on {
			req.Remote = "on"
		}
		switch err := it.c.call(ctx, api.MethodOffload, req, nil); {
		case err == nil:
			it.off.remoteOn.Store(on)
		case on:
			it.logger().Warn("offload auto: turning the nodes on failed; staying local", "job", it.job, "err", err)
			d.Reason += fmt.Sprintf("; turning the nodes on failed (%v): local", err)
			share = 1
		default:
			it.logger().Warn("offload auto: turning the nodes off failed; they go on leasing", "job", it.job, "err", err)
		}
	}
	if d.Capacity && share < 1 {
		it.off.gate.setFree(share)
	} else {
		it.off.gate.set(share)
	}
	it.setAuto(p, cached, d, "auto: "+d.Reason)
}

func (it *Iterator) setAuto(p OffloadProfile, cached bool, d offload.Decision, reason string) {
	it.mu.Lock()
	defer it.mu.Unlock()
	r := it.off
	if r.local.retiring() {
		return
	}
	_, _, share := r.gate.counts()
	r.mode = jobspec.OffloadLocal
	if share < 1 {
		r.mode = jobspec.FractionMode(math.Round(share*100) / 100)
	}
	r.cut = 0
	r.reason, r.profile, r.fromCache, r.predicted = reason, &p, cached, d.Predicted
	r.since, r.rowsAt = time.Now(), it.stats.Rows
}

func (it *Iterator) storeProfile(fingerprint string, p OffloadProfile) {
	if err := it.c.profiles.store(fingerprint, p); err != nil {
		it.logger().Warn("offload auto: remembering the profile", "err", err)
	}
}
