package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// deadlineOnly reports a deadline but is never cancelled: a context whose
// deadline has passed before its timer fired.
type deadlineOnly struct {
	context.Context
	dl time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.dl, true }

func TestCtxEnded(t *testing.T) {
	bg := context.Background()
	if err := ctxEnded(bg); err != nil {
		t.Errorf("background: %v", err)
	}
	if err := ctxEnded(deadlineOnly{bg, time.Now().Add(time.Hour)}); err != nil {
		t.Errorf("deadline ahead: %v", err)
	}
	if err := ctxEnded(deadlineOnly{bg, time.Now().Add(-time.Millisecond)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline passed, timer not fired: %v, want DeadlineExceeded", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ctxEnded(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
