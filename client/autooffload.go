package client

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client/offload"
	"github.com/feedmesh/feedmesh/pipeline"
)

// Offload auto, after FastFlow: profile, decide when and how much, and
// revise while the job runs. The deciding is client/offload's (pure):
// this file measures and applies.
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

// offloadMeters are the blocked times capacity is measured against.
type offloadMeters struct {
	localBlocked atomic.Int64 // ns the local worker waited to put a batch, for its share, or for splits
	// Rows each side put into the prefetch buffer (what it prepared; the
	// loop takes them later), and the bytes the nodes' batches took on
	// the wire.
	localRows, remoteRows, remoteWire atomic.Int64
}

// capacity is a side's rate had it never been held back (pure): rows
// over the time it was not blocked, at most bound× what it did. The local
// worker's blocked time is exact (it waits in one place), so its bound is
// wide; the nodes' is rough (held back, they go on producing into their
// queues and deliver in bursts when let go), so theirs is 4.
func capacity(rows int64, elapsed, blocked time.Duration, bound float64) float64 {
	if elapsed <= 0 || rows <= 0 {
		return 0
	}
	busy := max(float64(elapsed-blocked), float64(elapsed)/bound)
	return float64(rows) / busy * float64(time.Second)
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

// snapshot is the counters a measurement window is taken between.
type offloadSnapshot struct {
	at                      time.Time
	rows, localRows, remote int64
	remoteWire              int64
	work                    time.Duration
	localBlocked, remoteBlk time.Duration
}

func (it *Iterator) offloadSnapshot() offloadSnapshot {
	it.mu.Lock()
	defer it.mu.Unlock()
	return offloadSnapshot{at: time.Now(), rows: it.stats.Rows, localRows: it.off.meters.localRows.Load(), remote: it.off.meters.remoteRows.Load(), remoteWire: it.off.meters.remoteWire.Load(), work: it.stall.work,
		localBlocked: time.Duration(it.off.meters.localBlocked.Load()), remoteBlk: it.off.gate.heldRemote(time.Now())}
}

// measure is the profile of the window between a and b (pure).
func measure(a, b offloadSnapshot) OffloadProfile {
	p := OffloadProfile{Rows: b.rows - a.rows}
	if w := b.work - a.work; w > 0 {
		p.Ingest = float64(p.Rows) / w.Seconds()
	} else if p.Rows > 0 {
		p.Ingest = 1e9 // the loop takes no time of its own
	}
	el := b.at.Sub(a.at)
	p.Local = capacity(b.localRows-a.localRows, el, b.localBlocked-a.localBlocked, 20)
	if remoteRows := b.remote - a.remote; remoteRows > 0 {
		p.Remote, p.RemoteMeasured = capacity(remoteRows, el, b.remoteBlk-a.remoteBlk, 4), true
		p.LinkBytesPerSecond = capacity(b.remoteWire-a.remoteWire, el, b.remoteBlk-a.remoteBlk, 4)
	}
	return p
}

// opRates are the spec's ops as the local worker's pipeline statistics
// measured them (pure): the time an element spent in each (summed over
// its goroutines), the parallelism the spec gives it (what the nodes, and
// the client after a cut, run it with; an automatic one counts as 1), and
// the bytes per element after it. Nil when some op has not run.
func opRates(spec *pipeline.Spec, st pipeline.Stats) []offload.OpRate {
	if len(st.Ops) != len(spec.Ops)+1 {
		return nil
	}
	out := make([]offload.OpRate, len(spec.Ops))
	for i, op := range spec.Ops {
		s := st.Ops[i+1]
		if s.ElementsIn <= 0 || s.ElementsOut <= 0 {
			return nil
		}
		par := 1
		if op.Map != nil && op.Map.Parallelism > 1 {
			par = op.Map.Parallelism
		}
		out[i] = offload.OpRate{Seconds: s.BusySeconds / float64(s.ElementsIn), Parallelism: par, Bytes: float64(s.BytesOut) / float64(s.ElementsOut)}
	}
	return out
}

// runAuto is offload auto's loop (the Iterator's goroutine).
func (it *Iterator) runAuto(ctx context.Context, fingerprint string) {
	prof, cached := it.c.profiles.load(fingerprint)
	if !cached {
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
		var ok bool
		prof, ok = it.profileUntil(ctx, AutoProfileRows, AutoProfileTime, early)
		if !probed {
			linkBps = <-link // probeLink ends with ctx
		}
		if !ok {
			return
		}
		prof = complete(prof)
		it.storeProfile(fingerprint, prof)
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
			return
		}
		if m.RemoteMeasured {
			prof.Remote, prof.RemoteMeasured = m.Remote, true
			prof.LinkBytesPerSecond = max(prof.LinkBytesPerSecond, m.LinkBytesPerSecond)
			it.storeProfile(fingerprint, prof)
		}
		if d, err = offload.Decide(autoProfile(prof), offload.DefaultConfig()); err != nil {
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
	it.logger().Info("offload auto: cut the job while it runs; the nodes run the ops before the cut, this client the rest", "job", it.job, "cut", best.Cut, "predicted", best.Rate)
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

// servingNodes counts the nodes serving the job as last heard.
func (it *Iterator) servingNodes() int {
	it.mu.Lock()
	defer it.mu.Unlock()
	n := 0
	for _, w := range it.info.Workers {
		if _, local := w.LocalWorker(); !local && !w.Expired && !w.Drained {
			n++
		}
	}
	return n
}

// profile runs the local worker alone until AutoProfileRows rows reached
// the loop or AutoProfileTime passed, and measures.
func (it *Iterator) profile(ctx context.Context) (OffloadProfile, bool) {
	return it.profileFor(ctx, AutoProfileRows, AutoProfileTime)
}

// profileFor measures until rows rows reached the loop or d passed.
func (it *Iterator) profileFor(ctx context.Context, rows int64, d time.Duration) (OffloadProfile, bool) {
	return it.profileUntil(ctx, rows, d, nil)
}

// profileUntil is profileFor that also ends when early (if not nil)
// says so of the profile so far.
func (it *Iterator) profileUntil(ctx context.Context, rows int64, d time.Duration, early func(OffloadProfile) bool) (OffloadProfile, bool) {
	start := it.offloadSnapshot()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	deadline := start.at.Add(d)
	for {
		select {
		case <-ctx.Done():
			return OffloadProfile{}, false
		case <-t.C:
		}
		now := it.offloadSnapshot()
		if now.rows-start.rows >= rows || now.at.After(deadline) {
			return measure(start, now), true
		}
		if early != nil {
			if m := measure(start, now); early(m) {
				return m, true
			}
		}
	}
}

// estimateRemote guesses the nodes' rate before it is measured: the local
// rate per core times the job's live nodes (one core each), at most what
// the link probed carries of the batches the host made (their bytes per
// row, as the profile's rows weighed).
func (it *Iterator) estimateRemote(ctx context.Context, p OffloadProfile) float64 {
	est := p.Local / max(it.off.cores, 1) * float64(it.c.liveWorkerNodes(ctx))
	st := it.Stats()
	if p.LinkBytesPerSecond > 0 && st.Rows > 0 && st.Bytes > 0 {
		est = min(est, p.LinkBytesPerSecond/(float64(st.Bytes)/float64(st.Rows)))
	}
	return est
}

// Link probe bounds: a small call first (the connection's start), then
// one of probeBytes, timed.
const (
	probeWarmBytes = 16 << 10
	probeBytes     = 512 << 10
)

// probeLink times probeBytes from a node to this client (api.MethodProbe):
// the link's throughput, a lower bound on a fast link (a transfer this
// short does not fill it). 0 when it fails.
func (c *Client) probeLink(ctx context.Context) float64 {
	var resp api.ProbeResponse
	if err := c.call(ctx, api.MethodProbe, api.ProbeRequest{Bytes: probeWarmBytes}, &resp); err != nil {
		c.opts.Logger.Debug("offload auto: probing the link", "err", err)
		return 0
	}
	start := time.Now()
	if err := c.call(ctx, api.MethodProbe, api.ProbeRequest{Bytes: probeBytes}, &resp); err != nil || len(resp.Payload) != probeBytes {
		c.opts.Logger.Debug("offload auto: probing the link", "err", err, "bytes", len(resp.Payload))
		return 0
	}
	return probeBytes / max(time.Since(start).Seconds(), 1e-6)
}

// liveWorkerNodes counts the members that gossip holds alive and that run
// tasks (0 when the members cannot be listed).
func (c *Client) liveWorkerNodes(ctx context.Context) int {
	ms, err := c.Members(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, m := range ms {
		if m.Status == api.StatusAlive && m.Worker {
			n++
		}
	}
	return n
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
// the live nodes, when it predicts more than the threshold over the best
// decision without one (offload.Decide on the same profile) and its
// suffix runs in this process; with the reason, which names where the
// profile came from.
func (c *Client) cutFromProfile(ctx context.Context, spec *pipeline.Spec, prof OffloadProfile, from string, minGain float64) (offload.CutChoice, string, bool) {
	if len(prof.Ops) != len(spec.Ops) || !(prof.LinkBytesPerSecond > 0) {
		return offload.CutChoice{}, "", false
	}
	nodes := c.liveWorkerNodes(ctx)
	cfg := offload.DefaultConfig()
	best, ok := offload.BestCut(prof.Ops, offload.CutEnv{Ingest: prof.Ingest, Nodes: nodes, LinkBytesPerSecond: prof.LinkBytesPerSecond, Allowed: spec.Cuts()})
	if !ok {
		return offload.CutChoice{}, "", false
	}
	without, err := offload.Decide(autoProfile(prof), cfg)
	if err != nil || best.Rate <= without.Predicted*max(minGain, 1+cfg.SpeedUp) {
		return offload.CutChoice{}, "", false
	}
	if suffixRunsHere(spec, best.Cut) != nil {
		return offload.CutChoice{}, "", false
	}
	return best, fmt.Sprintf("auto: cut after %d ops, from %s: the nodes run the ops before it (%.4g elements/s on %d nodes) and ship %.4g bytes an element over a link measured at %.4g bytes/s (%.4g elements/s), this client runs the rest (%.4g/s): %.4g elements/s predicted, against %.4g without a cut",
		best.Cut, from, best.Remote, nodes, prof.Ops[best.Cut-1].Bytes, prof.LinkBytesPerSecond, best.Wire, best.Suffix, best.Rate, without.Predicted), true
}
