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
//  3. Revise every AutoReviseInterval from the rates of the last
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
)

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
	// Rows is how many rows the profile measured.
	Rows int64 `json:"rows"`
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
		return
	}
	if d.Offload && !prof.RemoteMeasured {
		var ok bool
		if prof, d, ok = it.profileNodes(ctx, fingerprint, prof, cached, d); !ok {
			return
		}
		// Which ops (FastFlow's partial offload), now that the link is
		// measured: a cut that beats the decision without one is put in
		// force at once, and the job runs it to its end.
		if it.tryCut(ctx, prof) {
			return
		}
	}
	it.applyAuto(ctx, prof, cached, d)
	it.reviseAuto(ctx, fingerprint, prof, d)
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
	early := func(m OffloadProfile) bool {
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
// False when ctx ended first, or no decision came.
func (it *Iterator) profileNodes(ctx context.Context, fingerprint string, prof OffloadProfile, cached bool, d offload.Decision) (OffloadProfile, offload.Decision, bool) {
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
	m, ok := it.profileFor(ctx, AutoProfileRows, AutoRemoteProfileTime)
	if !ok {
		return prof, d, false
	}
	if m.RemoteMeasured {
		prof.Remote, prof.RemoteMeasured = m.Remote, true
		prof.LinkBytesPerSecond = max(prof.LinkBytesPerSecond, m.LinkBytesPerSecond)
		it.storeProfile(fingerprint, prof)
	}
	d, err := offload.Decide(autoProfile(prof), offload.DefaultConfig())
	if err != nil {
		return prof, d, false
	}
	return prof, d, true
}

// reviseAuto is step 3: every AutoReviseInterval, the decision d in force
// is revised from the rates of the last interval, until ctx ends, the
// local worker retires, or a cut is put in force.
func (it *Iterator) reviseAuto(ctx context.Context, fingerprint string, prof OffloadProfile, d offload.Decision) {
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
		m := revised(prof, measure(last, now), last, now, nodes, n)
		last, nodes = now, n
		if m.Rows < 1 {
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
