package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Exactly-once delivery, the consumer's side (splits/exactly.go has the
// whole protocol). Every batch of an exactly-once job names its source
// elements (batch.Header.Prov). The consumer:
//   - records them as they come off a stream, and drops a batch whose
//     elements it has all received before (the last line of defence: the
//     protocol never sends one);
//   - reports what it received since its last report to the cluster every
//     Options.ReceiptInterval (receipts settle a split once they cover
//     what its worker emitted);
//   - fences a dead worker: once it has stopped reading every stream from
//     it, its next report says so, and the worker's unsettled splits are
//     read again by others, without what the receipts cover.
//
// Receipts lost with a failed report are sent again with the next one;
// a consumer that crashes takes its unreported receipts with it, and the
// cluster counts what it may have taken as abandoned (JobInfo.Exact).

// key is a split of an epoch.
type key struct{ epoch, split int64 }

// ledger is an exactly-once consumer's record of what it received. Safe
// for concurrent use (every stream goroutine records into it).
type ledger struct {
	mu      sync.Mutex
	seen    map[key]ranges.Set // everything received, in the last two epochs seen
	epoch   int64              // the latest epoch received
	pending map[key]ranges.Set // not yet reported
	fences  []string           // dead workers to fence in the next report
	dups    int64              // elements received twice (batches dropped or, if partly new, kept)
	kick    chan struct{}      // a fence or a full report is waiting
	track   *tracker           // what reaches the trainer (checkpoint.go)
	// takes counts the reports taken: what is recorded now goes out in
	// report takes+1 (reporter numbers reports in the same order), and
	// acked is the last report the cluster committed (a local worker
	// waits for its batch's, localworker.go).
	takes uint64
	acked ackSignal
	// localBatches and localBytes are the local worker's batches (and
	// their bytes) whose receipts wait for the next report (recordNow).
	localBatches int
	localBytes   int64
}

// ackSignal is the last committed report's number, with a channel closed
// at each change.
type ackSignal struct {
	mu  sync.Mutex
	n   uint64
	chg chan struct{}
}

func (a *ackSignal) set(n uint64) {
	a.mu.Lock()
	if n > a.n {
		a.n = n
		if a.chg != nil {
			close(a.chg)
			a.chg = nil
		}
	}
	a.mu.Unlock()
}

// wait blocks until report n is committed.
func (a *ackSignal) wait(ctx context.Context, n uint64) error {
	for {
		a.mu.Lock()
		if a.n >= n {
			a.mu.Unlock()
			return nil
		}
		if a.chg == nil {
			a.chg = make(chan struct{})
		}
		ch := a.chg
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// recordLocal records a local worker's batch of size bytes (as record)
// and returns the number of the report that will carry its receipt.
//
// The local worker's receipts are coalesced: the batches wait for one
// report that covers many of them, so that a host that makes its batches
// itself costs the nodes a Raft command per report, not per batch. That
// report goes out with the reporter's next tick (Options.ReceiptInterval)
// or, sooner, once localReportBatches batches or localReportBytes bytes
// wait for it (half of what the local worker lets wait: localAhead,
// localAheadBytes), so that its pipeline never waits for a report that
// is not on its way.
func (l *ledger) recordLocal(prov []batch.ProvRange, bytes int64) (dup bool, report uint64) {
	dup, _ = l.record(prov)
	l.mu.Lock()
	report = l.takes + 1
	if !dup {
		l.localBatches++
		l.localBytes += bytes
	}
	full := l.localBatches >= localReportBatches || l.localBytes >= localReportBytes
	l.mu.Unlock()
	if full {
		l.wake()
	}
	return dup, report
}

// How many of the local worker's batches (or bytes) wait for their
// receipts' report before it goes out without waiting for the next tick:
// half of what may wait (localAhead, localAheadBytes).
const (
	localReportBatches = localAhead / 2
	localReportBytes   = localAheadBytes / 2
)

func newLedger(t *tracker) *ledger {
	return &ledger{seen: map[key]ranges.Set{}, pending: map[key]ranges.Set{}, kick: make(chan struct{}, 1), track: t}
}

// maxPendingIntervals is how many receipt intervals wait before a report
// goes out without waiting for the next tick; well under what one report
// may carry (fsm.MaxReceiptIntervals).
const maxPendingIntervals = 4096

// record notes a batch's elements as received and queues them for the next
// report, unless all of them had been received before: then it reports a
// duplicate (drop the batch). dups is how many had been.
func (l *ledger) record(prov []batch.ProvRange) (dup bool, dups int64) {
	if len(prov) == 0 {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var total int64
	for _, r := range prov {
		if r.Epoch > l.epoch {
			// Bound seen to the two latest epochs: this check is the
			// last line of defence (the cluster's exclusions are the
			// first), and older epochs have all but ended.
			l.epoch = r.Epoch
			for k := range l.seen {
				if k.epoch < l.epoch-1 {
					delete(l.seen, k)
				}
			}
		}
		k := key{r.Epoch, r.Split}
		have := l.seen[k]
		total += r.Hi - r.Lo
		dups += have.CountIn(r.Lo, r.Hi)
		have.AddSpan(r.Lo, r.Hi)
		l.seen[k] = have
	}
	l.dups += dups
	if dups == total {
		return true, dups
	}
	// In the buffer before any receipt of it can go out: a heartbeat that
	// finds its epoch settled must find it here (tracker.beat).
	l.track.received(prov)
	intervals := 0
	for _, r := range prov {
		k := key{r.Epoch, r.Split}
		p := l.pending[k]
		p.AddSpan(r.Lo, r.Hi)
		l.pending[k] = p
		intervals += p.Intervals()
	}
	if intervals > maxPendingIntervals || len(l.pending) > maxPendingIntervals {
		l.wake()
	}
	return false, dups
}

// fence queues a dead worker's fence: the caller has stopped reading from
// it, and recorded everything it read.
func (l *ledger) fence(worker string) {
	l.mu.Lock()
	if !slices.Contains(l.fences, worker) {
		l.fences = append(l.fences, worker)
	}
	l.mu.Unlock()
	l.wake()
}

func (l *ledger) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// take removes and returns the next report; ok is false when there is
// nothing to report.
func (l *ledger) take(job, consumer string) (req api.ReceiptsRequest, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 && len(l.fences) == 0 {
		return req, false
	}
	req = api.ReceiptsRequest{Job: job, Consumer: consumer, Fenced: l.fences}
	ks := slices.SortedFunc(maps.Keys(l.pending), func(a, b key) int {
		if a.epoch != b.epoch {
			return cmpInt(a.epoch, b.epoch)
		}
		return cmpInt(a.split, b.split)
	})
	for _, k := range ks {
		req.Receipts = append(req.Receipts, api.Receipt{Epoch: k.epoch, Split: k.split, Got: l.pending[k]})
	}
	l.pending, l.fences = map[key]ranges.Set{}, nil
	l.localBatches, l.localBytes = 0, 0
	l.takes++
	return req, true
}

// duplicates is how many elements were received more than once.
func (l *ledger) duplicates() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dups
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reporter sends a ledger's reports every interval, and at once when the
// ledger asks (a fence, or many receipts), until ctx ends; then it sends
// what is left once more, bounded by flushTimeout.
type reporter struct {
	l        *ledger
	seq      uint64               // of the last report taken
	retry    *api.ReceiptsRequest // a report whose sending failed: sent again as it is
	job      string
	consumer string
	interval time.Duration
	send     func(ctx context.Context, req api.ReceiptsRequest) error
	onErr    func(error)
}

func (r *reporter) run(ctx context.Context, flushTimeout func() time.Duration) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last report: a failure now is final, so it is said
			// (none when flushTimeout says the cluster is out of reach).
			timeout := flushTimeout()
			if timeout <= 0 {
				r.report(errors.New("the last receipts were not sent: the cluster did not answer (Options.UnavailableTimeout)"))
				return
			}
			fctx, cancel := context.WithTimeout(context.Background(), timeout)
			r.report(r.flush(fctx))
			cancel()
			return
		case <-t.C:
		case <-r.l.kick:
		}
		if err := r.flush(ctx); ctx.Err() == nil {
			r.report(err) // cut short by the end: sent again just above, not a failure
		}
	}
}

func (r *reporter) report(err error) {
	if err != nil && r.onErr != nil {
		r.onErr(fmt.Errorf("report receipts: %w", err))
	}
}

// flush sends one report. A failed one is sent again, unchanged and with
// its number, before anything newer: it may have been applied (only its
// answer lost), and the cluster applies each number once.
func (r *reporter) flush(ctx context.Context) error {
	if r.retry == nil {
		req, ok := r.l.take(r.job, r.consumer)
		if !ok {
			return nil
		}
		r.seq++
		req.Seq = r.seq
		r.retry = &req
	}
	if err := r.send(ctx, *r.retry); err != nil {
		return err
	}
	r.l.acked.set(r.retry.Seq)
	r.retry = nil
	return nil
}
