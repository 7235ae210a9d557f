package client

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client/offload"
	"github.com/feedmesh/feedmesh/pipeline"
)

// What offload auto measures (autooffload.go): the rows each side put
// between two snapshots of the counters, and its capacity had it not been
// held back; the ops' rates; the link, probed; and, until the nodes are
// measured, an estimate of their rate.

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
	if el > 0 {
		p.Rate = float64(p.Rows) / el.Seconds()
	}
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
// says so of the profile so far and the time it has taken.
func (it *Iterator) profileUntil(ctx context.Context, rows int64, d time.Duration, early func(OffloadProfile, time.Duration) bool) (OffloadProfile, bool) {
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
			if m := measure(start, now); early(m, now.at.Sub(start.at)) {
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
