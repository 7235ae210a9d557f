package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/rounds"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

func TestEndingOf(t *testing.T) {
	remote := &batch.RemoteError{Message: "split 3: bad record"}
	version := fmt.Errorf("worker w1: %w", &batch.VersionError{Client: 2, Min: 1, Max: 1})
	for _, tc := range []struct {
		name string
		err  error
		want ending
		msg  string
	}{
		{"end of data", io.EOF, endOfData, ""},
		{"wrapped end of data", fmt.Errorf("read: %w", io.EOF), endOfData, ""},
		{"worker refused", remote, endRefused, "split 3: bad record"},
		{"wrapped refusal", fmt.Errorf("stream: %w", remote), endRefused, "split 3: bad record"},
		{"protocol version refused", version, endRefused, version.Error()},
		{"worker closed the stream", fmt.Errorf("worker w1 closed the stream: %w", io.ErrUnexpectedEOF), endBroken, ""},
		{"transport failure", transport.ErrUnavailable, endBroken, ""},
		{"malformed batch", batch.ErrMalformedBatch, endBroken, ""},
		{"cancelled", context.Canceled, endBroken, ""},
		{"other", errors.New("idle timeout"), endBroken, ""},
	} {
		got, msg := endingOf(tc.err)
		if got != tc.want || msg != tc.msg {
			t.Errorf("%s: endingOf(%v) = %v, %q; want %v, %q", tc.name, tc.err, got, msg, tc.want, tc.msg)
		}
	}
	// A refused version keeps its sentinel through the job's error.
	if err := workerFailed("j", "w1", version.Error(), version); !errors.Is(err, batch.ErrUnsupportedVersion) {
		t.Errorf("workerFailed(version refusal) = %v, want it to wrap batch.ErrUnsupportedVersion", err)
	}
	if err := workerFailed("j", "w1", "split 3: bad record", remote); err.Error() != `job "j": worker w1: split 3: bad record` {
		t.Errorf("workerFailed(refusal) = %q", err)
	}
}

func TestWorkerStreamsCanOpen(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		s       workerStreams
		want    bool
		waiting bool // would open but for its retry delay: run sets a timer for it
	}{
		{"fresh worker", workerStreams{addr: "a"}, true, false},
		{"address not known yet", workerStreams{}, false, false},
		{"one of two open", workerStreams{addr: "a", running: 1}, true, false},
		{"all open", workerStreams{addr: "a", running: 2}, false, false},
		{"sent its end of data", workerStreams{addr: "a", done: true}, false, false},
		{"expired", workerStreams{addr: "a", dropped: true}, false, false},
		{"backing off", workerStreams{addr: "a", fails: 1, retryAt: now.Add(time.Millisecond)}, false, true},
		{"backing off, all open", workerStreams{addr: "a", running: 2, fails: 1, retryAt: now.Add(time.Millisecond)}, false, false},
		{"expired while backing off", workerStreams{addr: "a", dropped: true, fails: 1, retryAt: now.Add(time.Millisecond)}, false, false},
		{"backoff over", workerStreams{addr: "a", fails: 1, retryAt: now}, true, false},
		{"paused (drained)", workerStreams{addr: "a", paused: true}, false, false},
		{"paused while backing off", workerStreams{addr: "a", paused: true, fails: 1, retryAt: now.Add(time.Millisecond)}, false, false},
	} {
		if got := tc.s.canOpen(now, 2); got != tc.want {
			t.Errorf("%s: canOpen = %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.s.waiting(now, 2); got != tc.waiting {
			t.Errorf("%s: waiting = %v, want %v", tc.name, got, tc.waiting)
		}
	}
}

func TestAllFinished(t *testing.T) {
	done := func() *workerStreams { return &workerStreams{done: true} }
	paused := func() *workerStreams { return &workerStreams{paused: true} }
	for _, tc := range []struct {
		name    string
		ws      map[string]*workerStreams
		stopped bool // the job is no longer running
		want    bool
	}{
		{"no worker yet", map[string]*workerStreams{}, false, false},
		{"one reading", map[string]*workerStreams{"a": {running: 1}}, false, false},
		{"all done", map[string]*workerStreams{"a": done(), "b": done()}, false, true},
		{"done, another stream still delivering", map[string]*workerStreams{"a": {done: true, running: 1}}, false, false},
		{"one done, one expired", map[string]*workerStreams{"a": done(), "b": {dropped: true, running: 1}}, false, true},
		{"one done, one failing", map[string]*workerStreams{"a": done(), "b": {fails: 3}}, false, false},
		// A drained worker's next process may bring more while the job runs.
		{"one done, one paused, job running", map[string]*workerStreams{"a": done(), "b": paused()}, false, false},
		{"one done, one paused and expired, job running", map[string]*workerStreams{"a": done(), "b": {paused: true, dropped: true}}, false, false},
		{"one done, one paused, job finished", map[string]*workerStreams{"a": done(), "b": paused()}, true, true},
	} {
		if got := allFinished(tc.ws, !tc.stopped); got != tc.want {
			t.Errorf("%s: allFinished = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRoundsEnded(t *testing.T) {
	sched := rounds.Schedule{Changes: []rounds.Change{
		{From: 0, Workers: []string{"a", "b"}},
		{From: 100, Workers: []string{"a", "b", "c"}},
	}}
	set := func(ws ...string) map[string]bool {
		m := map[string]bool{}
		for _, w := range ws {
			m[w] = true
		}
		return m
	}
	for _, tc := range []struct {
		name           string
		sched          rounds.Schedule
		next           int64
		ended, expired map[string]bool
		done, anyEnded bool
	}{
		{"no schedule yet", rounds.Schedule{}, 0, set("a"), set(), false, false},
		{"all reading", sched, 10, set(), set(), false, false},
		{"one of the rotation ended", sched, 10, set("a"), set(), false, false},
		{"the rotation ended, a later worker has not", sched, 10, set("a", "b"), set(), false, false},
		{"every worker from next on ended", sched, 10, set("a", "b", "c"), set(), true, true},
		{"ended or expired", sched, 10, set("a"), set("b", "c"), true, true},
		{"all expired", sched, 10, set(), set("a", "b", "c"), true, false},
		{"past the last change", sched, 150, set("a", "b", "c"), set(), true, true},
		{"past the last change, one still reading", sched, 150, set("a", "b"), set(), false, false},
	} {
		done, anyEnded := roundsEnded(tc.sched, tc.next, tc.ended, tc.expired)
		if done != tc.done || anyEnded != tc.anyEnded {
			t.Errorf("%s: roundsEnded = %v, %v; want %v, %v", tc.name, done, anyEnded, tc.done, tc.anyEnded)
		}
	}
}
