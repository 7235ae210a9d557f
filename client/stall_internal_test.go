package client

import (
	"math"
	"testing"
	"time"
)

func TestStallMeter(t *testing.T) {
	var m stallMeter
	var s Stats
	m.fill(&s)
	if s.StallFraction != 0 || s.BatchTimeSeconds != 0 {
		t.Fatalf("no batch yet: %+v", s)
	}
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// First batch: 30 ms of waiting, no work before it (nothing to count).
	m.record(t0, t0.Add(ms(30)), 0, "w0")
	// Then 150 batches: 10 ms of the loop's work, 2 ms of waiting, 3
	// batches buffered on entry.
	at := t0.Add(ms(30))
	for i := 0; i < 150; i++ {
		entered := at.Add(ms(10))
		at = entered.Add(ms(2))
		m.record(entered, at, 3, []string{"w1", "w2"}[i%2])
	}
	m.fill(&s)
	wantTotal := (30.0 + 150*2) / (30 + 150*12)
	if math.Abs(s.StallFraction-wantTotal) > 1e-9 || math.Abs(s.WaitSeconds-0.330) > 1e-9 {
		t.Errorf("stall %v (want %v), wait %v s", s.StallFraction, wantTotal, s.WaitSeconds)
	}
	if math.Abs(s.RecentStallFraction-2.0/12) > 1e-9 || math.Abs(s.BatchTimeSeconds-0.012) > 1e-9 || s.ResultQueue != 3 {
		t.Errorf("the last %d batches: stall %v (want 1/6), batch time %v s (want 0.012), queue %v (want 3)",
			StallWindow, s.RecentStallFraction, s.BatchTimeSeconds, s.ResultQueue)
	}
	// The window's batches came from w1 and w2 (w0's fell out of it).
	if w := m.workers(); w != 2 {
		t.Errorf("workers in the window: %d, want 2", w)
	}
}
