package client

import (
	"testing"
	"time"
)

func TestRetryPolicyDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		p     retryPolicy
		fails int
		want  time.Duration
	}{
		{defaultRetry, -1, 0},
		{defaultRetry, 0, 0},
		{defaultRetry, 1, 100 * ms},
		{defaultRetry, 2, 200 * ms},
		{defaultRetry, 3, 400 * ms},
		{defaultRetry, 4, 800 * ms},
		{defaultRetry, 5, 1600 * ms},
		{defaultRetry, 6, 2 * time.Second}, // 3.2 s, capped
		{defaultRetry, 7, 2 * time.Second},
		{defaultRetry, 63, 2 * time.Second}, // the shift does not overflow
		{defaultRetry, 1 << 30, 2 * time.Second},
		{retryPolicy{Base: time.Second, Max: time.Hour}, 40, time.Hour},
		{retryPolicy{Base: 10 * ms, Max: 15 * ms}, 1, 15 * ms},
		{retryPolicy{Base: time.Hour, Max: 1<<63 - 1}, 1 << 30, 1<<63 - 1},
		{retryPolicy{}, 5, 0},
		// Coordinated rounds: a quarter heartbeat every time.
		{roundRetry(time.Second), 1, 250 * ms},
		{roundRetry(time.Second), 2, 250 * ms},
		{roundRetry(time.Second), 40, 250 * ms},
		{roundRetry(200 * ms), 3, 50 * ms},
	} {
		if got := tc.p.delay(tc.fails); got != tc.want {
			t.Errorf("%+v.delay(%d) = %v, want %v", tc.p, tc.fails, got, tc.want)
		}
	}
}
