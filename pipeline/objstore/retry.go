package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"
)

// StatusError is an HTTP status a request got, for the retry decision.
type StatusError struct {
	Code int
	// S3Code is S3's error code (SlowDown, NoSuchKey, …) when there is one.
	S3Code string
	Msg    string
}

func (e *StatusError) Error() string {
	if e.S3Code != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.Code, e.S3Code, e.Msg)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Msg)
}

// retryable says whether a failed request may succeed if sent again:
// throttling (429, S3 SlowDown), the server's transient failures (500,
// 502, 503, 504) and broken or timed-out connections. Not: 4xx answers
// about the request itself (denied, not found, precondition failed).
func retryable(err error) bool {
	if errors.Is(err, ErrNotAllowed) {
		return false // the policy's answer does not change
	}
	var se *StatusError
	if errors.As(err, &se) {
		switch se.S3Code {
		case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "RequestTimeTooSkewed":
			return true
		}
		switch se.Code {
		case 429, 500, 502, 503, 504:
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) // timeouts and other network failures
}

// retry runs op until it succeeds, fails with an error that is not
// retryable, or has been retried MaxRetries times, backing off
// exponentially with jitter between attempts.
func (s *Store) retry(ctx context.Context, op func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = op(); err == nil || !retryable(err) || attempt >= s.cfg.MaxRetries {
			if err != nil && attempt > 0 {
				return fmt.Errorf("%w (after %d retries)", err, attempt)
			}
			return err
		}
		if werr := wait(ctx, backoff(s.cfg.RetryBaseDelay, s.cfg.RetryMaxDelay, attempt)); werr != nil {
			return err
		}
	}
}

// backoff is base·2^attempt capped at max, scaled by a random factor in
// [0.5, 1) so that readers throttled together do not retry together.
func backoff(base, max time.Duration, attempt int) time.Duration {
	d := base << min(attempt, 20)
	if d > max || d <= 0 {
		d = max
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()/2))
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
