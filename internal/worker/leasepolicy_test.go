package worker

import (
	"testing"
	"time"
)

const ms = time.Millisecond

func TestLeasePolicySize(t *testing.T) {
	cases := []struct {
		name      string
		maxSplits int
		splitTime time.Duration
		want      int
	}{
		{"rate unknown: 4 to spread the start of a job", 256, 0, 4},
		{"rate unknown, LeaseSplits below 4", 2, 0, 2},
		{"fast pipeline: LeaseDuration's worth, capped at LeaseSplits", 256, 100 * time.Microsecond, 256},
		{"1ms splits: 250ms worth", 256, ms, 250},
		{"4ms splits", 256, 4 * ms, 62},
		{"one split takes LeaseDuration", 256, 250 * ms, 1},
		{"slow pipeline: one split at a time", 256, time.Second, 1},
		{"LeaseSplits 1", 1, ms, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// FailoverAhead does not change the size: the queue grows to
			// it a lease at a time.
			p := newLeasePolicy(tc.maxSplits, 250*ms, 3*time.Second)
			p.splitTime = tc.splitTime
			if got := p.size(); got != tc.want {
				t.Errorf("size() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestLeasePolicyAskAhead: the next lease is asked for while the queued
// splits cover at most twice the time a lease takes, or less than a
// failover (FailoverAhead) while fewer than LeaseSplits; never with one in
// flight, never once done.
func TestLeasePolicyAskAhead(t *testing.T) {
	cases := []struct {
		name                 string
		leaseTime, splitTime time.Duration
		queued               int
		inflight, done       bool
		want                 bool
		ahead                time.Duration // FailoverAhead
		running              time.Duration // since the first ask for a split
	}{
		{"nothing known, nothing queued", 0, 0, 0, false, false, true, 0, time.Hour},
		{"rate unknown, splits queued", 10 * ms, 0, 100, false, false, true, 0, time.Hour},
		{"queue covers exactly twice the lease time", 10 * ms, 2 * ms, 10, false, false, true, 0, time.Hour},
		{"queue covers more", 10 * ms, 2 * ms, 11, false, false, false, 0, time.Hour},
		{"slow pipeline, one split queued", 10 * ms, time.Second, 1, false, false, false, 0, time.Hour},
		{"slow pipeline, queue empty", 10 * ms, time.Second, 0, false, false, true, 0, time.Hour},
		{"slow leases: ask further ahead", 3 * time.Second, time.Second, 6, false, false, true, 0, time.Hour},
		{"a lease in flight", 10 * ms, 2 * ms, 0, true, false, false, 0, time.Hour},
		{"done", 10 * ms, 2 * ms, 0, false, true, false, 0, time.Hour},
		{"failover: the queue covers less than it", 10 * ms, 2 * ms, 100, false, false, true, time.Second, time.Hour},
		{"failover: the queue covers just less", 10 * ms, 20 * ms, 49, false, false, true, time.Second, time.Hour},
		{"failover: the queue covers it exactly", 10 * ms, 20 * ms, 50, false, false, false, time.Second, time.Hour},
		{"failover: LeaseSplits queued bound it", 10 * ms, 100 * time.Microsecond, 256, false, false, false, 3 * time.Second, time.Hour},
		{"failover: just below LeaseSplits queued", 10 * ms, 100 * time.Microsecond, 255, false, false, true, 3 * time.Second, time.Hour},
		{"failover: a lease in flight", 10 * ms, 2 * ms, 0, true, false, false, time.Second, time.Hour},
		{"failover: done", 10 * ms, 2 * ms, 0, false, true, false, time.Second, time.Hour},
		{"failover, early: the queue covers less than the time running", 10 * ms, 2 * ms, 50, false, false, true, time.Second, 200 * ms},
		{"failover, early: the queue covers the time running", 10 * ms, 2 * ms, 100, false, false, false, time.Second, 200 * ms},
		{"failover, just started: twice the lease time only", 10 * ms, 2 * ms, 11, false, false, false, time.Second, 0},
	}
	t0 := time.Unix(1000, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newLeasePolicy(256, 250*ms, tc.ahead)
			p.leaseTime, p.splitTime, p.inflight, p.done = tc.leaseTime, tc.splitTime, tc.inflight, tc.done
			p.start = t0.Add(-tc.running)
			got := p.next(t0, false, tc.queued)
			if (got > 0) != tc.want {
				t.Fatalf("next(queued %d) = %d, want an ask: %v", tc.queued, got, tc.want)
			}
			if got > 0 && (!p.inflight || !p.askedAt.Equal(t0)) {
				t.Errorf("an ask is not counted in flight from now: inflight %v, askedAt %v", p.inflight, p.askedAt)
			}
			if tc.splitTime != p.splitTime {
				t.Errorf("next without a finished split changed the split time to %v", p.splitTime)
			}
		})
	}
}

// leaseStep is one event of a lease loop's life: the pipeline asks for a
// split (next), finds the queue empty (empty), or a lease comes back
// (answered).
type leaseStep struct {
	op       string        // "next", "empty" or "answered"
	at       time.Duration // since the start
	finished bool          // next: the previous split was read completely
	queued   int           // next: splits queued
	done     bool          // answered: no more splits will come
	ask      int           // next, empty: the lease asked for (0: none)
	end      bool          // empty: no split will come
}

func TestLeasePolicyScript(t *testing.T) {
	scripts := []struct {
		name      string
		maxSplits int
		ahead     time.Duration // FailoverAhead
		steps     []leaseStep
	}{
		{"start of a job, rate learned, then done", 256, 0, []leaseStep{
			{op: "next", at: 0, ask: 4},
			{op: "empty", at: 0},                                          // wait for the lease in flight
			{op: "answered", at: 10 * ms},                                 // leaseTime 10ms
			{op: "next", at: 10 * ms, queued: 4, ask: 4},                  // rate unknown: ask at once
			{op: "next", at: 12 * ms, finished: true, queued: 3},          // splitTime 2ms; in flight
			{op: "answered", at: 20 * ms},                                 // leaseTime 10ms
			{op: "next", at: 22 * ms, finished: true, queued: 6},          // splitTime (3*2+10)/4 = 4ms: 24ms > 20ms
			{op: "next", at: 26 * ms, finished: true, queued: 5, ask: 62}, // 20ms <= 20ms: 250ms/4ms
			{op: "answered", at: 36 * ms, done: true},
			{op: "next", at: 40 * ms, finished: true, queued: 3}, // done: the queue is still read
			{op: "next", at: 44 * ms, finished: true, queued: 0},
			{op: "empty", at: 44 * ms, end: true},
		}},
		{"slow pipeline: one split per lease, asked when the queue runs out", 256, 0, []leaseStep{
			{op: "next", at: 0, ask: 4},
			{op: "answered", at: 10 * ms},
			{op: "next", at: 10 * ms, queued: 4, ask: 4},
			{op: "answered", at: 20 * ms},
			{op: "next", at: 1020 * ms, finished: true, queued: 1},         // splitTime 1010ms
			{op: "next", at: 2020 * ms, finished: true, queued: 0, ask: 1}, // 250ms / ~1s
		}},
		{"a short lease (the end of an epoch): ask again as soon as it runs out", 256, 0, []leaseStep{
			{op: "next", at: 0, ask: 4},
			{op: "answered", at: 10 * ms},
			{op: "next", at: 10 * ms, queued: 1, ask: 4},
			{op: "answered", at: 20 * ms},
			{op: "next", at: 30 * ms, finished: true, queued: 0, ask: 12}, // splitTime 20ms, queue empty: 250ms/20ms
			{op: "empty", at: 30 * ms},                                    // in flight: wait
			{op: "answered", at: 40 * ms},
			{op: "empty", at: 40 * ms, ask: 12}, // answered with nothing: ask again
		}},
		{"LeaseSplits caps a fast pipeline", 100, 0, []leaseStep{
			{op: "next", at: 0, ask: 4},
			{op: "answered", at: 1 * ms},
			{op: "next", at: 1 * ms, queued: 4, ask: 4},
			{op: "answered", at: 2 * ms}, // leaseTime 1ms
			{op: "next", at: 2*ms + 100*time.Microsecond, finished: true, queued: 1, ask: 100}, // 100µs splits
		}},
		{"a failover: the queue covers it", 256, time.Second, failoverScript()},
		{"expired from the job: ends like done", 256, 0, []leaseStep{
			{op: "next", at: 0, ask: 4},
			{op: "empty", at: 0},
			{op: "answered", at: 10 * ms, done: true},
			{op: "empty", at: 10 * ms, end: true},
		}},
	}
	t0 := time.Unix(1000, 0)
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			p := newLeasePolicy(sc.maxSplits, 250*ms, sc.ahead)
			for i, s := range sc.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "next":
					if got := p.next(now, s.finished, s.queued); got != s.ask {
						t.Fatalf("step %d: next(%v, finished %v, queued %d) = %d, want %d (splitTime %v, leaseTime %v)",
							i, s.at, s.finished, s.queued, got, s.ask, p.splitTime, p.leaseTime)
					}
				case "empty":
					ask, end := p.empty(now)
					if ask != s.ask || end != s.end {
						t.Fatalf("step %d: empty(%v) = %d, %v; want %d, %v", i, s.at, ask, end, s.ask, s.end)
					}
				case "answered":
					p.answered(now, s.done)
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
			}
		})
	}
}

// failoverScript: with FailoverAhead 1s, a lease loop whose leases take
// 10ms grows its queue, as it runs, to a second's worth of its 100ms
// splits (not just twice a lease's round trip, 20ms), so a lease that
// takes 850ms to come back (the leader died with it in flight) finds the
// pipeline still reading.
func failoverScript() []leaseStep {
	return []leaseStep{
		{op: "next", at: 0, ask: 4},
		{op: "answered", at: 10 * ms}, // leaseTime 10ms
		{op: "next", at: 10 * ms, queued: 4, ask: 4},
		{op: "answered", at: 20 * ms},
		{op: "next", at: 110 * ms, finished: true, queued: 7}, // splitTime 100ms: 700ms queued, running 110ms
		{op: "next", at: 210 * ms, finished: true, queued: 6},
		{op: "next", at: 310 * ms, finished: true, queued: 5},
		{op: "next", at: 410 * ms, finished: true, queued: 4, ask: 2}, // 400ms < 410ms running; 250ms/100ms
		{op: "answered", at: 420 * ms},
		{op: "next", at: 510 * ms, finished: true, queued: 5, ask: 2},
		{op: "answered", at: 520 * ms},
		{op: "next", at: 610 * ms, finished: true, queued: 6, ask: 2},
		{op: "answered", at: 620 * ms},
		{op: "next", at: 710 * ms, finished: true, queued: 7, ask: 2},
		{op: "answered", at: 720 * ms},
		{op: "next", at: 810 * ms, finished: true, queued: 8, ask: 2},
		{op: "answered", at: 820 * ms},
		{op: "next", at: 910 * ms, finished: true, queued: 9, ask: 2},
		{op: "answered", at: 920 * ms},
		{op: "next", at: 1010 * ms, finished: true, queued: 10},        // 1s: covered
		{op: "next", at: 1110 * ms, finished: true, queued: 9, ask: 2}, // the leader dies with this lease in flight
		{op: "next", at: 1210 * ms, finished: true, queued: 8},
		{op: "next", at: 1310 * ms, finished: true, queued: 7},
		{op: "next", at: 1410 * ms, finished: true, queued: 6},
		{op: "next", at: 1510 * ms, finished: true, queued: 5},
		{op: "next", at: 1610 * ms, finished: true, queued: 4},
		{op: "next", at: 1710 * ms, finished: true, queued: 3},
		{op: "next", at: 1810 * ms, finished: true, queued: 2},
		{op: "next", at: 1910 * ms, finished: true, queued: 1},
		{op: "answered", at: 1960 * ms},                                // by the new leader; leaseTime (3*10+850)/4 = 220ms
		{op: "next", at: 2010 * ms, finished: true, queued: 2, ask: 2}, // the queue never ran out
	}
}

func TestEWMA(t *testing.T) {
	cases := []struct{ avg, sample, want time.Duration }{
		{0, 10 * ms, 10 * ms}, // the first sample sets it
		{10 * ms, 10 * ms, 10 * ms},
		{2 * ms, 10 * ms, 4 * ms},
		{8 * ms, 0, 6 * ms},
	}
	for _, tc := range cases {
		if got := ewma(tc.avg, tc.sample); got != tc.want {
			t.Errorf("ewma(%v, %v) = %v, want %v", tc.avg, tc.sample, got, tc.want)
		}
	}
}

// TestLeasePolicyHold: however fast the rate seems, the splits queued,
// and so a lease, never exceed hold (a share of the job's splits): a
// rate measured while buffers fill (1.3 ms a split) asked for 186 of a
// resumed job's 280 splits before.
func TestLeasePolicyHold(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		share float64
		want  int
	}{
		{300, 0, 19}, {300, 1.0 / 16, 19}, {16, 0, 1}, {1, 0, 1}, {100000, 0, 6250},
		{300, 0.5, 150}, {300, -1, 0}, {0, 0, 0},
	} {
		if got := holdSplits(tc.n, tc.share); got != tc.want {
			t.Errorf("holdSplits(%d, %v) = %d, want %d", tc.n, tc.share, got, tc.want)
		}
	}
	t0 := time.Unix(1000, 0)
	p := newLeasePolicy(256, 250*ms, 3*time.Second)
	p.hold = 19
	p.start, p.lastNext = t0.Add(-time.Second), t0.Add(-1300*time.Microsecond)
	p.leaseTime, p.splitTime = 15*ms, 1300*time.Microsecond
	if got := p.size(); got != 19 {
		t.Errorf("size() at 1.3 ms a split = %d, want hold, 19", got)
	}
	if got := p.next(t0, true, 4); got != 15 {
		t.Errorf("next with 4 queued = %d, want 15: the queue up to hold", got)
	}
	p.inflight = false
	if got := p.next(t0.Add(ms), false, 19); got != 0 {
		t.Errorf("next with hold queued = %d, want no ask", got)
	}
	if got := p.next(t0.Add(2*ms), false, 18); got != 1 {
		t.Errorf("next with 18 queued = %d, want 1", got)
	}
	p.inflight = false
	if ask, end := p.empty(t0.Add(3 * ms)); ask != 19 || end {
		t.Errorf("empty() = %d, %v; want a lease of hold, 19", ask, end)
	}
	free := newLeasePolicy(256, 250*ms, 3*time.Second)
	free.splitTime = 1300 * time.Microsecond
	if got := free.size(); got != 192 {
		t.Errorf("no hold: size() = %d, want 250ms/1.3ms = 192", got)
	}
}
