package main

import (
	"context"
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/client"
)

// releaseWatch follows an exactly-once job's counters after one of its
// workers was killed (recovery): when the dead worker's unsettled splits
// became orphaned (its expiry committed) and when the last of them was
// leased again to a survivor. It polls the job's counters every interval
// (the figures are that coarse) from a goroutine that wait stops.
type releaseWatch struct {
	killed time.Time
	cancel context.CancelFunc
	done   chan struct{}

	// Written by the goroutine, read once done is closed.
	orphanedAt, releasedAt time.Time
	requeued               int64
	err                    error
}

func watchReleases(ctx context.Context, cl *client.Client, job string, killed time.Time, interval time.Duration) *releaseWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &releaseWatch{killed: killed, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if w.poll(ctx, cl, job) {
				return
			}
		}
	}()
	return w
}

// poll reads the job's counters once; true once the splits are leased
// again (or the job is gone).
func (w *releaseWatch) poll(ctx context.Context, cl *client.Client, job string) bool {
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		return false // a slow answer under load: the next tick asks again
	}
	now := time.Now()
	for _, j := range jobs {
		if j.Name != job {
			continue
		}
		x := j.Exact
		if x == nil {
			w.err = fmt.Errorf("job %q is not exactly-once: nothing is leased again", job)
			return true
		}
		if w.orphanedAt.IsZero() && (x.Orphaned > 0 || x.Requeued > 0) {
			w.orphanedAt = now
		}
		if !w.orphanedAt.IsZero() && x.Orphaned == 0 && x.Requeued > 0 {
			w.releasedAt, w.requeued = now, x.Requeued
			return true
		}
		return false
	}
	w.err = fmt.Errorf("job %q is gone", job)
	return true
}

// wait waits up to timeout for the splits to be leased again, stops the
// goroutine and returns the times from the kill to the orphaning and to
// the last re-lease, and how many splits were leased again.
func (w *releaseWatch) wait(timeout time.Duration) (orphaned, released time.Duration, requeued int64, err error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	}
	w.cancel()
	<-w.done
	switch {
	case w.err != nil:
		return 0, 0, 0, w.err
	case w.releasedAt.IsZero():
		return 0, 0, 0, fmt.Errorf("the killed worker's splits were not leased again within %s", timeout)
	}
	return w.orphanedAt.Sub(w.killed), w.releasedAt.Sub(w.killed), w.requeued, nil
}
