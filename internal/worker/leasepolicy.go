package worker

import (
	"math"
	"time"
)

// leasePolicy decides, for one DYNAMIC lease loop (Leaser), when to
// ask for the next lease and for how many splits. It is pure, like
// quic-go's ackhandler: the loop passes the time in, and the policy reads
// no clock, starts no goroutine and does no I/O, so it is tested by table
// (leasepolicy_test.go).
//
// Its rules:
//   - Size: LeaseDuration's worth of splits at the rate the pipeline reads
//     them, at most LeaseSplits and at least 1; 4 before the rate is known,
//     so the first leases spread the start of a job over the workers. Only
//     splits read whole are timed: one leased with exclusions (a resumed
//     job's, delivered before the checkpoint) skips its delivered elements
//     before the first op, so its time is not the pipeline's. Timed, the
//     fully delivered splits at the head of a resumed job made the first
//     worker's second lease LeaseSplits, most of the rest of the job, and
//     the workers that came after found little left (46,000 / 4,000 /
//     4,000 elements seen on three nodes, 2.5 times as long). The
//     policy does not see the epoch: the leader hands out fewer splits than
//     asked when fewer are left in the epoch, and the policy asks again.
//   - Hold a share at most: the splits queued, and so a lease, never
//     exceed hold (Config.LeaseHoldShare of the job's splits, 1/16 by
//     default), whatever the rate says. A rate measured while the
//     pipeline's buffers fill (the first splits after those a resume
//     skips: 1.3 ms a split where 70 ms was the truth) once made a lease
//     186 of a resumed job's 280 splits (19,000 / 5,200 / 3,800
//     elements); with the bound a worker holds at most a sixteenth of the
//     job beyond the split it reads, so the workers that read together
//     finish within that of each other.
//   - Ask ahead: while the splits queued still cover at most twice the time
//     a lease takes to come back, ask for the next one, so the pipeline
//     never waits on Raft (an fsync on a quorum).
//   - Ride out a failover: also while they cover less than ahead
//     (Config.FailoverAhead: about the time Raft takes to elect a new
//     leader, during which no lease is granted) and number fewer than
//     LeaseSplits, ask for the next one, so the pipeline does not run dry
//     while the leader is replaced. The queue grows to it no faster than
//     the loop runs (it covers at most the time since the first split was
//     asked for), a lease of the usual size at a time, so the workers that
//     start a job together still share it when it is short: a failover's
//     worth at once would go to the first worker that asks.
//   - One lease in flight at a time; none once a lease said done (the job,
//     or share group, has handed out everything).
type leasePolicy struct {
	maxSplits int           // Config.LeaseSplits
	hold      int           // the most splits queued (holdSplits); 0: no bound
	duration  time.Duration // Config.LeaseDuration
	ahead     time.Duration // Config.FailoverAhead, its default applied

	inflight bool // a lease was asked for and has not been answered
	done     bool // a lease said no more will be handed out

	// Moving averages: the time a lease takes to come back, and the time
	// the pipeline spends on one split (between two asks for a split).
	leaseTime, splitTime time.Duration
	lastNext, askedAt    time.Time
	start                time.Time // the first ask for a split
}

func newLeasePolicy(maxSplits int, duration, ahead time.Duration) leasePolicy {
	return leasePolicy{maxSplits: maxSplits, duration: duration, ahead: ahead}
}

// next records that the pipeline asks for a split at now (finished: it
// has read the one it had before completely, and that one is timed: it
// had no exclusions), with queued splits leased and not yet handed out.
// ask > 0 is the size of a lease to ask for now, ahead of need; the
// policy then counts it in flight from now.
func (p *leasePolicy) next(now time.Time, finished bool, queued int) (ask int) {
	p.observe(now, finished)
	if !p.done && !p.inflight && p.short(now, queued) {
		ask = p.ask(now)
		if p.hold > 0 {
			ask = min(ask, p.hold-queued) // short: queued < hold
		}
		return ask
	}
	return 0
}

// observe records that the pipeline asks for a split at now, as next does,
// for a loop that may not ask ahead now (its share gate is closed).
func (p *leasePolicy) observe(now time.Time, finished bool) {
	if finished {
		p.splitTime = ewma(p.splitTime, now.Sub(p.lastNext))
	}
	p.lastNext = now
	if p.start.IsZero() {
		p.start = now
	}
}

// short reports whether queued splits are too few, at now, to go on
// without asking for more: they cover at most twice a lease's round trip,
// or less than a failover (ahead, but no more than the loop has been
// running) while fewer than LeaseSplits; never once they number hold.
func (p *leasePolicy) short(now time.Time, queued int) bool {
	if p.hold > 0 && queued >= p.hold {
		return false
	}
	covered := time.Duration(queued) * p.splitTime
	ahead := min(p.ahead, now.Sub(p.start))
	return covered <= 2*p.leaseTime || (covered < ahead && queued < p.maxSplits)
}

// empty decides what to do, at now, when no leased split is queued: ask for
// a lease of ask splits (counted in flight from now), wait for the lease in
// flight (0, false), or end: no split will come (0, true).
func (p *leasePolicy) empty(now time.Time) (ask int, end bool) {
	switch {
	case p.done && !p.inflight:
		return 0, true
	case p.inflight:
		return 0, false
	default:
		return p.ask(now), false
	}
}

// answered records, at now, the answer to the lease in flight; done: it
// said that no more splits will be handed out (or the worker was expired
// from the job, which ends its part the same way).
func (p *leasePolicy) answered(now time.Time, done bool) {
	p.inflight = false
	p.leaseTime = ewma(p.leaseTime, now.Sub(p.askedAt))
	p.done = p.done || done
}

func (p *leasePolicy) ask(now time.Time) int {
	p.inflight = true
	p.askedAt = now
	return p.size()
}

// size is how many splits the next lease asks for.
func (p *leasePolicy) size() int {
	n := min(4, p.maxSplits)
	if p.splitTime > 0 {
		n = int(max(1, min(int64(p.maxSplits), int64(p.duration/p.splitTime))))
	}
	if p.hold > 0 {
		n = min(n, p.hold)
	}
	return n
}

// DefaultLeaseHoldShare is Config.LeaseHoldShare's default: a worker holds
// at most a sixteenth of a job's splits leased ahead.
const DefaultLeaseHoldShare = 1.0 / 16

// holdSplits is the most splits a lease loop over n splits (an epoch)
// holds queued, for share (Config.LeaseHoldShare; 0: the default): at
// least 1; 0 (no bound) for a negative share or no split count.
func holdSplits(n int64, share float64) int {
	if share == 0 {
		share = DefaultLeaseHoldShare
	}
	if share < 0 || n <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(float64(n)*share)))
}

// ewma folds sample into a moving average (the first sample sets it).
func ewma(avg, sample time.Duration) time.Duration {
	if avg == 0 {
		return sample
	}
	return (3*avg + sample) / 4
}
