package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"
)

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&StatusError{Code: 503, S3Code: "SlowDown"}, true},
		{&StatusError{Code: 503}, true},
		{&StatusError{Code: 429}, true},
		{&StatusError{Code: 500, S3Code: "InternalError"}, true},
		{&StatusError{Code: 400, S3Code: "RequestTimeout"}, true},
		{&StatusError{Code: 403, S3Code: "AccessDenied"}, false},
		{&StatusError{Code: 404, S3Code: "NoSuchKey"}, false},
		{&StatusError{Code: 412}, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{&NamedError{Name: "s3://b/k", Err: fmt.Errorf("%w: x", ErrVanished)}, false},
		{errors.New("anything else"), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	base, max := 100*time.Millisecond, 5*time.Second
	for attempt := range 40 {
		want := min(base<<min(attempt, 20), max)
		for range 20 {
			d := backoff(base, max, attempt)
			if d < want/2 || d >= want {
				t.Fatalf("backoff(attempt %d) = %v, want in [%v, %v)", attempt, d, want/2, want)
			}
		}
	}
}

func TestRetryStopsAtMaxRetries(t *testing.T) {
	s := New(Config{MaxRetries: 3, RetryBaseDelay: time.Microsecond, RetryMaxDelay: time.Microsecond})
	calls := 0
	err := s.retry(context.Background(), func() error { calls++; return &StatusError{Code: 503} })
	if calls != 4 || err == nil {
		t.Fatalf("%d calls, %v; want 1 + 3 retries", calls, err)
	}
	calls = 0
	err = s.retry(context.Background(), func() error { calls++; return &StatusError{Code: 403} })
	if calls != 1 || err == nil {
		t.Fatalf("not retryable: %d calls, %v", calls, err)
	}
}
