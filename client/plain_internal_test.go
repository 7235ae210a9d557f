package client

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
)

// fakeHost is a host that opens no stream and counts nothing.
type fakeHost struct{ dropped int }

func (h *fakeHost) openStream(context.Context, string, string, streamRequest) (*stream, error) {
	return nil, context.Canceled
}
func (h *fakeHost) put(context.Context, item) error { return nil }
func (h *fakeHost) queue() chan<- item              { return nil }
func (h *fakeHost) workerAddr(string) string        { return "" }
func (h *fakeHost) fail(error)                      {}
func (h *fakeHost) kickHeartbeat()                  {}
func (h *fakeHost) countReconnect()                 {}
func (h *fakeHost) countDropped()                   { h.dropped++ }
func (h *fakeHost) countRound(roundCount)           {}
func (h *fakeHost) logger() *slog.Logger            { return slog.New(slog.DiscardHandler) }

// TestReconcileFencesAWorkerExpiredAfterItsEnd: exactly-once, a worker
// the cluster expires after it sent this consumer its end of data (cut
// off from the leader after its last batch) still gets this consumer's
// fence, or the splits it produced and that had not settled stay
// orphaned and the job never ends; it is not counted dropped (nothing
// was cut short).
func TestReconcileFencesAWorkerExpiredAfterItsEnd(t *testing.T) {
	h := &fakeHost{}
	info := api.JobInfo{Name: "j", State: api.JobRunning, Workers: []api.WorkerInfo{{Name: "w1", Addr: "a", Since: 5, Incarnation: 7}}}
	l := newLedger(newTracker(nil))
	p := newPlain(h, info, "c", Options{Logger: slog.New(slog.DiscardHandler), StreamsPerWorker: 1}, false, l)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &workerStreams{since: 5, inc: 7, addr: "a", opened: true, done: true}
	s.ctx, s.cancel = context.WithCancel(ctx)
	p.workers["w1"] = s
	p.reconcile(ctx)
	if len(l.fences) != 0 {
		t.Fatalf("fenced a live worker: %v", l.fences)
	}
	p.info.Workers[0].Expired = true
	p.reconcile(ctx)
	if !slices.Contains(l.fences, "w1") {
		t.Fatalf("the worker expired after its end of data was not fenced (fences %v)", l.fences)
	}
	if h.dropped != 0 {
		t.Errorf("counted %d dropped workers, want 0: it had ended", h.dropped)
	}
}

// TestEndNotWhenEveryWorkerDied: a DYNAMIC job still running whose every
// known worker was dropped has not ended (the cluster gives it another
// worker, which reads what is left); an OFF job has (each worker's copy
// was its own), and so has a DYNAMIC job once it is not running, or
// whose workers ended.
func TestEndNotWhenEveryWorkerDied(t *testing.T) {
	for _, tc := range []struct {
		sharding jobspec.Sharding
		state    string
		dropped  bool
		want     bool
	}{
		{jobspec.Dynamic, api.JobRunning, true, false},
		{jobspec.Dynamic, "", true, false},
		{jobspec.Dynamic, api.JobFinished, true, true},
		{jobspec.Dynamic, api.JobRunning, false, true},
		{jobspec.Off, api.JobRunning, true, true},
		{jobspec.Static, api.JobRunning, true, true},
	} {
		info := api.JobInfo{Name: "j", State: tc.state, Options: jobspec.Options{Sharding: tc.sharding}}
		p := newPlain(&fakeHost{}, info, "c", Options{Logger: slog.New(slog.DiscardHandler), StreamsPerWorker: 1}, false, nil)
		p.workers["w1"] = &workerStreams{dropped: tc.dropped, done: !tc.dropped, opened: true}
		if got := p.ended(); got != tc.want {
			t.Errorf("sharding %s, state %q, the only worker dropped %v: ended %v, want %v", tc.sharding, tc.state, tc.dropped, got, tc.want)
		}
	}
}
