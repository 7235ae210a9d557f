package client

import (
	"time"

	"github.com/feedmesh/feedmesh/api"
)

// How much of the training loop's time goes to waiting for data: the
// measure FastFlow calls a preprocessing stall, and the batch time that
// Cachew's autoscaling follows. Next reads the clock twice per batch: on
// entry (the time since the last batch was returned is the loop's own
// work) and on return (the time inside Next is waiting for data).

// StallWindow is how many of the last batches Stats.BatchTimeSeconds and
// Stats.RecentStallFraction average over (Cachew's metric window).
const StallWindow = 100

// stallMeter accumulates the loop's work and wait per batch. It belongs to
// the goroutine calling Next; Stats reads a copy under the iterator's lock.
type stallMeter struct {
	lastReturn time.Time
	// Totals since the first batch, and a ring of the last StallWindow
	// batches' (wait, work).
	wait, work time.Duration
	ring       [StallWindow][2]time.Duration
	n          int // batches recorded (ring holds min(n, StallWindow))
	// queued sums the result queue's length seen on entry to Next, over
	// the ring's batches (Cachew's result-queue fill); workerRing is the
	// worker that delivered each.
	queuedRing [StallWindow]int
	workerRing [StallWindow]string
}

// record counts one batch: entered is when Next was called, returned when
// it returned the batch, queued the batches buffered on entry.
func (m *stallMeter) record(entered, returned time.Time, queued int, worker string) {
	var work time.Duration
	if !m.lastReturn.IsZero() {
		work = max(entered.Sub(m.lastReturn), 0)
	}
	wait := max(returned.Sub(entered), 0)
	m.wait += wait
	m.work += work
	m.ring[m.n%StallWindow] = [2]time.Duration{wait, work}
	m.queuedRing[m.n%StallWindow] = queued
	m.workerRing[m.n%StallWindow] = worker
	m.n++
	m.lastReturn = returned
}

// fill writes the meter's figures into s.
func (m *stallMeter) fill(s *Stats) {
	if m.n == 0 {
		return
	}
	s.WaitSeconds = m.wait.Seconds()
	if total := m.wait + m.work; total > 0 {
		s.StallFraction = float64(m.wait) / float64(total)
	}
	k := min(m.n, StallWindow)
	var wait, work time.Duration
	queued := 0
	for i := 0; i < k; i++ {
		wait += m.ring[i][0]
		work += m.ring[i][1]
		queued += m.queuedRing[i]
	}
	s.BatchTimeSeconds = (wait + work).Seconds() / float64(k)
	if total := wait + work; total > 0 {
		s.RecentStallFraction = float64(wait) / float64(total)
	}
	s.ResultQueue = float64(queued) / float64(k)
}

// workers counts the workers that delivered the ring's batches.
func (m *stallMeter) workers() int {
	seen := map[string]bool{}
	for i := 0; i < min(m.n, StallWindow); i++ {
		if w := m.workerRing[i]; w != "" {
			seen[w] = true
		}
	}
	return len(seen)
}

// consumerMetrics is what the heartbeat reports of the training loop (nil
// before the first batch): the figures over the last StallWindow batches.
func (it *Iterator) consumerMetrics() *api.ConsumerMetrics {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.stall.n == 0 {
		return nil
	}
	var s Stats
	it.stall.fill(&s)
	return &api.ConsumerMetrics{BatchTimeSeconds: s.BatchTimeSeconds, ResultQueue: s.ResultQueue, Stall: min(max(s.RecentStallFraction, 0), 1), Batches: it.stats.Batches,
		Workers: it.stall.workers()}
}
