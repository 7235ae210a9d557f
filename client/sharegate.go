package client

import (
	"context"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/internal/worker"
)

// fractionGate holds the local worker to its fraction of the elements the
// consumer receives. Safe for concurrent use.
type fractionGate struct {
	mu       sync.Mutex
	fraction float64 // the local worker's share, in [0, 1]
	// free: neither side is held to the fraction (offload auto's
	// "shared by capacity": each prepares all it can).
	free bool
	// local and remote count the batches each side prepared since the
	// share was last set (the share holds from then on, not over what
	// went before: auto's profiling alone was all local); the totals count
	// them all.
	local, remote           int64
	totalLocal, totalRemote int64
	remoteOn                func() bool
	jobEnded                func() bool // the job's state, as last heard, is no longer running
	// localBusy: the local worker has splits to read (it is not between
	// phases, finished or gone): only then are the nodes held to their
	// share, or a node holding the last splits would wait for ever.
	localBusy bool
	changed   chan struct{} // capacity 1: a count or the fraction moved
	// slack is how many batches the local worker may run ahead of its
	// share (it leases a few splits at a time).
	slack int64
	// The wall time the nodes' batches were held (some stream waiting),
	// for offload auto's measure of their capacity.
	remoteWaiting int
	remoteSince   time.Time
	remoteHeld    time.Duration
}

// heldRemote is the wall time the nodes' batches were held so far.
func (g *fractionGate) heldRemote(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.remoteHeld
	if g.remoteWaiting > 0 {
		h += now.Sub(g.remoteSince)
	}
	return h
}

func newFractionGate(fraction float64, slack int64, remoteOn, jobEnded func() bool) *fractionGate {
	return &fractionGate{fraction: fraction, slack: slack, remoteOn: remoteOn, jobEnded: jobEnded, changed: make(chan struct{}, 1)}
}

func (g *fractionGate) add(local bool, n int64) {
	g.mu.Lock()
	if local {
		g.local += n
		g.totalLocal += n
	} else {
		g.remote += n
		g.totalRemote += n
	}
	g.mu.Unlock()
	g.wake()
}

func (g *fractionGate) wake() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// set changes the fraction, counting from now, and holds both sides to it.
func (g *fractionGate) set(f float64) { g.setHeld(f, false) }

// setFree records f as the expected share but holds neither side to it.
func (g *fractionGate) setFree(f float64) { g.setHeld(f, true) }

func (g *fractionGate) setHeld(f float64, free bool) {
	g.mu.Lock()
	g.fraction, g.free = f, free
	g.local, g.remote = 0, 0
	g.mu.Unlock()
	g.wake()
}

// counts are the totals and the fraction in force.
func (g *fractionGate) counts() (local, remote int64, fraction float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totalLocal, g.totalRemote, g.fraction
}

// mayTake is the gate's rule for the local worker (pure): it takes more
// while its count stays within its share of the total plus its share of
// the slack, or when no node serves the job.
func mayTake(local, remote int64, fraction float64, slack int64, remoteOn bool) bool {
	if fraction >= 1 || !remoteOn {
		return true
	}
	return float64(local) <= fraction*float64(local+remote+slack)
}

// mayReceive is the rule for the nodes' batches (pure): one more is read
// while their count stays within their share of the total plus theirs of
// the slack, or while the local worker has nothing to read. The two
// shares of the slack add up to it, so one side may always go on.
func mayReceive(local, remote int64, fraction float64, slack int64, localBusy bool) bool {
	if fraction <= 0 || !localBusy {
		return true
	}
	return float64(remote) <= (1-fraction)*float64(local+remote+slack)
}

// Open reports whether the local worker may take more now.
func (g *fractionGate) Open() bool {
	on := g.remoteOn()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.free || mayTake(g.local, g.remote, g.fraction, g.slack, on)
}

// Busy says whether the local worker has splits to read.
func (g *fractionGate) Busy(b bool) {
	g.mu.Lock()
	g.localBusy = b
	g.mu.Unlock()
	g.wake()
}

// waitRemote blocks a node's batch until the nodes are within their
// share: the stream then grants no credit, and the node slows down.
func (g *fractionGate) waitRemote(ctx context.Context) error {
	g.mu.Lock()
	open := g.free || mayReceive(g.local, g.remote, g.fraction, g.slack, g.localBusy)
	if !open {
		if g.remoteWaiting == 0 {
			g.remoteSince = time.Now()
		}
		g.remoteWaiting++
	}
	g.mu.Unlock()
	if open {
		return nil
	}
	defer func() {
		g.mu.Lock()
		g.remoteWaiting--
		if g.remoteWaiting == 0 {
			g.remoteHeld += time.Since(g.remoteSince)
		}
		g.mu.Unlock()
	}()
	return g.waitFor(ctx, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.free || mayReceive(g.local, g.remote, g.fraction, g.slack, g.localBusy)
	})
}

// gatePoll is how often a closed gate looks again without news (a node
// that stopped sending, say).
const gatePoll = 50 * time.Millisecond

// Wait blocks until the local worker may take another split, or the job
// has ended (worker.ErrJobEnded).
func (g *fractionGate) Wait(ctx context.Context) error {
	ended := false
	err := g.waitFor(ctx, func() bool {
		on := g.remoteOn()
		g.mu.Lock()
		yes := g.free || mayTake(g.local, g.remote, g.fraction, g.slack, on)
		g.mu.Unlock()
		if yes {
			return true
		}
		ended = g.jobEnded != nil && g.jobEnded()
		return ended
	})
	if err == nil && ended {
		return worker.ErrJobEnded
	}
	return err
}

// waitFor waits until ok holds. ok is called without g.mu (it may
// take the Iterator's lock, which is taken before g.mu elsewhere). The changed
// channel has one waiter's worth of capacity, so every waiter also
// looks again every gatePoll.
func (g *fractionGate) waitFor(ctx context.Context, ok func() bool) error {
	t := time.NewTimer(gatePoll)
	defer t.Stop()
	for {
		if ok() {
			return nil
		}
		t.Reset(gatePoll)
		select {
		case <-g.changed:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
