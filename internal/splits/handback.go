package splits

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/ranges"
)

// Handing back: a worker that shuts down gracefully (a drain) returns the
// splits it leased and has not started, so that they are read by the
// others instead of being lost (at-most-once) or waiting for its expiry to
// be read again (exactly-once).
//
// A split handed back goes to HandedBack and is leased again, before any
// other split, to the next worker that asks; exactly-once, with the
// indices already delivered excluded, as any lease. It stays counted
// leased (Counts.Leased counts the splits handed out of the sequence), in
// the invariant Leased == Finished + Lost + outstanding + handed back.
// Lease.Done is not said while any split waits there. At-most-once
// workers stop asking once a lease says Done, so a hand-back is refused
// once every split is handed out (Done may have been said): the worker
// reads what it holds before it leaves instead. Workers of an
// exactly-once job keep asking until every split is produced, so there it
// is accepted at any time.
//
// Either way a hand-back needs another worker to take the splits: the
// caller (the state machine, internal/fsm) refuses it when the worker is its job's last live one.

// ErrHandBackRefused: the splits cannot be handed back; the worker must read
// them itself. Not a failure: a draining worker then finishes its queue.
var ErrHandBackRefused = errors.New("splits: hand-back refused")

// HandBack records that worker returns splits of epoch that it holds and
// has not started reading. Every split must be outstanding for worker in
// that epoch and listed once; otherwise HandBack changes nothing and
// returns an error wrapping ErrNotLeased. An at-most-once job refuses it
// (ErrHandBackRefused) once everything is handed out.
func (d *DynamicState) HandBack(worker string, epoch int64, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if d.Exact == nil && d.done() {
		return fmt.Errorf("%w: every split is handed out, so the other workers may have stopped asking", ErrHandBackRefused)
	}
	if len(ids) > MaxLease {
		return fmt.Errorf("hand back %d splits, limit %d", len(ids), MaxLease)
	}
	out := d.Outstanding[epoch]
	seen := make(map[int64]struct{}, len(ids))
	for _, s := range ids {
		if _, dup := seen[s]; dup {
			return fmt.Errorf("hand back epoch %d: split %d listed twice", epoch, s)
		}
		seen[s] = struct{}{}
		if holder, ok := out[s]; !ok || holder != worker {
			return fmt.Errorf("%w: split %d of epoch %d is not outstanding for %q", ErrNotLeased, s, epoch, worker)
		}
	}
	back := 0
	for _, s := range ids {
		ranges.Del(d.Outstanding, epoch, s)
		if x := d.Exact; x != nil {
			ranges.Del(x.Lenient, epoch, s) // nothing of it was produced: a departure since took nothing
			if _, census := ranges.Get(x.Censusing, epoch, s); census {
				// A census not run: orphaned again, for the next
				// worker (its dead worker's fences are all in).
				x.uncensus(epoch, s)
				ranges.Put(x.Orphaned, epoch, s, worker)
				continue
			}
		}
		back++
		if d.HandedBack == nil {
			d.HandedBack = map[int64]map[int64]bool{}
		}
		ranges.Put(d.HandedBack, epoch, s, true)
	}
	d.Total.HandedBack += int64(back)
	return nil
}

// leaseHandedBack hands worker up to n splits handed back, of the
// earliest epoch that has any (exactly-once, with their delivered indices
// excluded); ok is false when there is none.
func (d *DynamicState) leaseHandedBack(worker string, n int) (l Lease, ok bool) {
	if len(d.HandedBack) == 0 {
		return Lease{}, false
	}
	e := slices.Min(slices.Collect(maps.Keys(d.HandedBack)))
	ids := slices.Sorted(maps.Keys(d.HandedBack[e]))
	ids = ids[:min(len(ids), min(max(n, 1), MaxLease))]
	l = Lease{Epoch: e, Splits: ids}
	if x := d.Exact; x != nil {
		l.Exclude = make([]ranges.Set, len(ids))
		for i, s := range ids {
			l.Exclude[i] = x.Delivered[e][s].Clone()
		}
	}
	for _, s := range ids {
		ranges.Del(d.HandedBack, e, s)
		ranges.Put(d.Outstanding, e, s, worker)
	}
	if len(d.HandedBack) == 0 {
		d.HandedBack = nil
	}
	return l, true
}

// handedBack counts the splits handed back and not leased again, per epoch.
func (d *DynamicState) handedBack() map[int64]int64 {
	n := map[int64]int64{}
	for e, m := range d.HandedBack {
		n[e] += int64(len(m))
	}
	return n
}

// Held counts, per worker, the splits it holds: leased to it, and
// (exactly-once) produced by it and not settled yet. A draining worker
// leaves once it holds none, so that nothing of it is read again.
func (d *DynamicState) Held() map[string]int {
	n := map[string]int{}
	for _, out := range d.Outstanding {
		for _, w := range out {
			n[w]++
		}
	}
	if x := d.Exact; x != nil {
		for _, m := range x.Produced {
			for _, p := range m {
				n[p.Worker]++
			}
		}
	}
	return n
}
