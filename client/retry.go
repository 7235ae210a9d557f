package client

import "time"

// retryPolicy is how long a reader waits before it opens another stream to
// a worker whose last streams failed: exponential from Base, capped at Max,
// so a worker that fails fast (closing, resetting streams) is not hammered
// in a loop while one that is only slow to come back is retried often
// enough. Both engines use it: the plain engine per worker, the
// coordinated one per round. It is pure: the caller counts the failures
// and reads the clock.
type retryPolicy struct {
	Base time.Duration
	Max  time.Duration
}

// defaultRetry waits 100 ms after a first failure, doubling up to 2 s.
var defaultRetry = retryPolicy{Base: 50 * time.Millisecond, Max: 2 * time.Second}

// delay is the wait before the next attempt after fails consecutive
// failures; none before a first attempt (fails <= 0).
func (p retryPolicy) delay(fails int) time.Duration {
	if fails <= 0 || p.Base <= 0 {
		return 0
	}
	d := p.Base
	for range min(fails, 64) { // d doubles: it passes any Max within 64
		if d > p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// roundRetry is the coordinated engine's policy: a quarter of the
// heartbeat interval after every failure (250 ms by default). Rounds are
// delivered in order, so every consumer of the job waits on a round whose
// worker is slow to come back: it is asked again often, not after a delay
// that doubles to seconds.
func roundRetry(heartbeat time.Duration) retryPolicy {
	return retryPolicy{Base: heartbeat / 8, Max: heartbeat / 4}
}
