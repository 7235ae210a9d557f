package splits

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// Bounds of a DynamicState. They are constants, not config fields, because every
// replica of the state must accept or reject the same things.
const (
	// MaxSplits bounds NumSplits. Nothing in a DynamicState grows with
	// NumSplits except the leases outstanding at one time.
	MaxSplits = 1 << 40
	// MaxLease bounds the splits handed out by one Lease call.
	MaxLease = 1 << 14
)

var (
	// ErrNotLeased: a split being finished is not outstanding for that
	// worker in that epoch: never leased, leased to another worker,
	// already finished, or lost when the worker was expired. A worker that
	// retries a Finish whose response it lost gets this error for splits
	// the first attempt finished, and may ignore it.
	ErrNotLeased = errors.New("splits: split not leased to this worker")
	// ErrInvalid: a decoded DynamicState breaks an invariant (Validate).
	ErrInvalid = errors.New("splits: invalid dynamic sharding state")
)

// Counts counts splits by what became of their leases. At any time
// Leased == Finished + Lost + (leases still outstanding).
type Counts struct {
	// Leased is how many splits were handed out.
	Leased int64 `cbor:"1,keyasint" json:"leased"`
	// Finished is how many of them the worker reported done.
	Finished int64 `cbor:"2,keyasint" json:"finished"`
	// Lost is how many were outstanding when their worker was expired.
	Lost int64 `cbor:"3,keyasint" json:"lost"`
	// HandedBack counts the times a draining worker returned a split it
	// had not started (handback.go). Such a split stays counted in Leased
	// (and is outstanding or handed back until it finishes or is lost):
	// this count is not part of the sum above.
	HandedBack int64 `cbor:"4,keyasint,omitempty" json:"handed_back,omitempty"`
}

// Lease is the result of one Lease call.
type Lease struct {
	// Epoch is the epoch the splits belong to (0-based). Finish needs it.
	Epoch int64 `cbor:"1,keyasint" json:"epoch"`
	// Splits are the split ids handed out, ascending; empty when nothing
	// is left.
	Splits []int64 `cbor:"2,keyasint" json:"splits"`
	// Done is true when, after this lease, no split of any epoch remains to
	// be handed out: the worker should stop asking (outstanding leases of
	// other workers may still be running). Exactly-once: no split remains
	// to be handed out for the first time, but a worker's death may still
	// orphan splits, so workers keep asking, rarely, until Complete.
	Done bool `cbor:"3,keyasint" json:"done"`
	// Exclude (exactly-once), when not empty, has one entry per split:
	// the element indices already delivered, which the worker must not
	// yield again (a split leased again after its worker died).
	Exclude []ranges.Set `cbor:"4,keyasint,omitempty" json:"exclude,omitempty"`
	// Key 5 held Complete, which AllProduced implies; not reused.
	// AllProduced (exactly-once): every split is handed out and emitted
	// by a live worker (DynamicState.AllProduced); a worker whose own
	// splits are all emitted ends its part.
	AllProduced bool `cbor:"6,keyasint,omitempty" json:"all_produced,omitempty"`
	// Cut is the job's offload boundary when the lease was answered (set
	// by the state machine, internal/fsm; 0: none): the worker runs the
	// splits' elements through the ops before it only. Every element
	// says which way it was made, so a retry answered after a job was
	// cut, whose splits run cut, delivers the same elements.
	Cut int `cbor:"7,keyasint,omitempty" json:"cut,omitempty"`
	// Census (at-most-once with a count, census.go): the splits are dead
	// workers' splits to run as a census: the worker runs them (Exclude
	// applies), delivers nothing, and reports what they emitted
	// (Produce), which counts as lost. A census lease holds nothing else.
	Census bool `cbor:"8,keyasint,omitempty" json:"census,omitempty"`
}

// Clone returns a copy that shares nothing with l.
func (l Lease) Clone() Lease {
	l.Splits = slices.Clone(l.Splits)
	if l.Exclude != nil {
		ex := make([]ranges.Set, len(l.Exclude))
		for i, r := range l.Exclude {
			ex[i] = r.Clone()
		}
		l.Exclude = ex
	}
	return l
}

// LeaseRecord is a worker's last lease, kept so that a retried request
// (same worker, same request id) gets the same answer.
type LeaseRecord struct {
	// RequestID is the worker's id for the request.
	RequestID uint64 `cbor:"1,keyasint" json:"request_id"`
	// Lease is what that request was given.
	Lease Lease `cbor:"2,keyasint" json:"lease"`
}

// DynamicState is the DYNAMIC-sharding bookkeeping of one job (the name
// Dynamic is the Policy's): first come first served leases of split ids
// [0, NumSplits), epoch after epoch, at most once under failure.
//
// Epochs advance as soon as every split of the current epoch has been
// handed out, without waiting for those splits to finish: a worker that
// asks after the last split of epoch e went out gets splits of epoch e+1
// while others still read their last splits of e. That keeps every worker
// busy across the boundary, as a repeated tf.data dataset does; the price is
// that epochs overlap, so leases are tracked per (epoch, split).
//
// A worker's outstanding leases become lost when it is expired (Expire) and
// are never handed out again in that epoch: a worker that was declared dead
// may still have delivered some of their elements, so re-leasing them could
// deliver an element twice. Without Expire every split is handed out exactly
// once per epoch.
//
// The exported fields are the persistent state, encoded in the state machine's (internal/fsm)
// snapshots: maps encode with sorted keys under a deterministic CBOR mode,
// so equal states give equal bytes. Treat them as read-only; change a
// DynamicState only through its methods.
type DynamicState struct {
	// NumSplits is the number of splits per epoch, ids 0..NumSplits-1.
	NumSplits int64 `cbor:"1,keyasint" json:"num_splits"`
	// Epochs is how many epochs the job runs; 0 repeats forever.
	Epochs int64 `cbor:"2,keyasint" json:"epochs"`
	// Epoch is the epoch being handed out (0-based). Once everything is
	// handed out it stays at the last epoch with Next == NumSplits.
	Epoch int64 `cbor:"3,keyasint" json:"epoch"`
	// Next is the next split id of Epoch to hand out.
	Next int64 `cbor:"4,keyasint" json:"next"`
	// Outstanding maps epoch → split → worker for the leases neither
	// finished nor lost. Inner maps are never empty.
	Outstanding map[int64]map[int64]string `cbor:"5,keyasint" json:"outstanding"`
	// Total counts over every epoch.
	Total Counts `cbor:"6,keyasint" json:"total"`
	// PerEpoch counts the epochs still in progress: the current one, and
	// earlier ones while some of their leases are outstanding. An earlier
	// epoch's entry is dropped when its last lease finishes or is lost.
	PerEpoch map[int64]Counts `cbor:"7,keyasint" json:"per_epoch"`
	// LastLease is each worker's last lease, for idempotent retries. A
	// worker's record is dropped when it is expired.
	LastLease map[string]LeaseRecord `cbor:"8,keyasint" json:"last_lease"`
	// Exact is the exactly-once bookkeeping (exactly.go); nil for an
	// at-most-once job.
	Exact *ExactState `cbor:"9,keyasint,omitempty" json:"exact,omitempty"`
	// Resume is set for a job resumed from checkpoints (resume.go).
	Resume *ResumeState `cbor:"10,keyasint,omitempty" json:"resume,omitempty"`
	// HandedBack maps epoch → split for the splits a draining worker
	// returned unread, leased again first (handback.go); nil when there
	// are none. Inner maps are never empty.
	HandedBack map[int64]map[int64]bool `cbor:"11,keyasint,omitempty" json:"handed_back,omitempty"`
	// Ahead holds the splits of the current epoch at or after Next that
	// were handed out ahead of the cursor, because the worker that asked
	// preferred them (LeasePreferring); the cursor skips them. Nil when
	// there are none; emptied as the cursor passes them.
	Ahead map[int64]bool `cbor:"12,keyasint,omitempty" json:"ahead,omitempty"`
}

// NewDynamic returns the bookkeeping of a job over numSplits splits per
// epoch for epochs epochs (0: forever). Values out of range are clamped to
// [0, MaxSplits] and [0, jobspec.MaxEpochs]; numSplits 0 means there is nothing to
// hand out, even when epochs is 0.
func NewDynamic(numSplits, epochs int64) *DynamicState {
	numSplits = min(max(numSplits, 0), MaxSplits)
	epochs = min(max(epochs, 0), jobspec.MaxEpochs)
	return &DynamicState{
		NumSplits:   numSplits,
		Epochs:      epochs,
		Outstanding: map[int64]map[int64]string{},
		PerEpoch:    map[int64]Counts{0: {}},
		LastLease:   map[string]LeaseRecord{},
	}
}

// done reports whether every split of every epoch has been handed out.
func (d *DynamicState) done() bool {
	if d.NumSplits == 0 {
		return true
	}
	return d.Epochs > 0 && d.Epoch == d.Epochs-1 && d.Next >= d.NumSplits
}

// allOut reports whether every split of every epoch has been handed out
// and none waits, handed back, to be leased again: workers may stop
// asking (Lease.Done).
func (d *DynamicState) allOut() bool { return d.done() && len(d.HandedBack) == 0 }

// Lease hands worker up to n splits of the current epoch, in id order, and
// records them as outstanding for it. n is clamped to [1, MaxLease]. One
// lease never spans two epochs: when it takes the last split of an epoch
// and more epochs remain, the epoch advances (see DynamicState) and the next
// lease starts on the new one. Done is set once every epoch is fully handed
// out; from then on leases are empty.
//
// requestID makes retries safe: if it equals the request id of worker's
// last lease, that lease is returned again and nothing more is handed out,
// so a Raft command re-proposed after its response was lost does not leak
// splits. Workers should number their requests from 1; requestID 0 is never
// treated as a retry.
func (d *DynamicState) Lease(worker string, requestID uint64, n int) Lease {
	return d.LeasePreferring(worker, requestID, n, nil)
}

// LeasePreferring is Lease for a worker that prefers the splits in prefer
// (the splits its autocache holds: docs/jobs/autocache.md): of the splits the
// cursor would hand out in this epoch, those in prefer come first, ahead of
// the cursor (Ahead), then the cursor's. Splits handed back or orphaned
// still go first, and no rule of leasing changes: each split is handed out
// once per epoch, and the cursor skips the splits taken ahead.
func (d *DynamicState) LeasePreferring(worker string, requestID uint64, n int, prefer ranges.Set) Lease {
	return d.LeaseAs(worker, requestID, n, prefer, false)
}

// LeaseAs is LeasePreferring for a worker that says whether it runs a
// census (runsCensus): a consumer's local worker is leased a census only
// if it does (census.go); a node always does.
func (d *DynamicState) LeaseAs(worker string, requestID uint64, n int, prefer ranges.Set, runsCensus bool) Lease {
	if requestID != 0 {
		if r, ok := d.LastLease[worker]; ok && r.RequestID == requestID {
			return r.Lease.Clone()
		}
	}
	l, ok := d.leaseHandedBack(worker, n)
	if !ok && d.Exact != nil {
		l, ok = d.leaseOrphans(worker, n, runsCensus)
	}
	if ok {
		l.Done = d.allOut()
		d.LastLease[worker] = LeaseRecord{RequestID: requestID, Lease: l.Clone()}
		return l
	}
	if d.Waiting() {
		// A resumed job hands out nothing before its checkpoints are in.
		l = Lease{Epoch: d.Epoch}
		d.LastLease[worker] = LeaseRecord{RequestID: requestID, Lease: l.Clone()}
		return l
	}
	d.skipResumed()
	l = Lease{Epoch: d.Epoch}
	if !d.done() {
		n = min(max(n, 1), MaxLease)
		l.Splits = make([]int64, 0, min(int64(n), d.NumSplits-d.Next))
		out := d.Outstanding[d.Epoch]
		if out == nil {
			out = map[int64]string{}
		}
		take := func(s int64) {
			ex, skip := d.takePrior(d.Epoch, s)
			if skip {
				d.countSkipped(1)
				return
			}
			if !ex.Empty() {
				if l.Exclude == nil {
					l.Exclude = make([]ranges.Set, len(l.Splits), cap(l.Splits))
				}
				ranges.Put(d.Exact.Delivered, d.Epoch, s, ex.Clone())
			}
			if l.Exclude != nil {
				l.Exclude = append(l.Exclude, ex)
			}
			out[s] = worker
			l.Splits = append(l.Splits, s)
		}
		for i := 0; i+1 < len(prefer) && len(l.Splits) < n; i += 2 {
			for s := max(prefer[i], d.Next); s < min(prefer[i+1], d.NumSplits) && len(l.Splits) < n; s++ {
				if d.Ahead[s] {
					continue
				}
				if s == d.Next {
					d.Next++
				} else {
					if d.Ahead == nil {
						d.Ahead = map[int64]bool{}
					}
					d.Ahead[s] = true
				}
				take(s)
			}
		}
		for len(l.Splits) < n && d.Next < d.NumSplits {
			s := d.Next
			d.Next++
			if d.Ahead[s] {
				delete(d.Ahead, s)
				continue
			}
			take(s)
		}
		d.passAhead()
		if len(out) > 0 {
			d.Outstanding[d.Epoch] = out
		}
		k := int64(len(l.Splits))
		c := d.PerEpoch[d.Epoch]
		c.Leased += k
		d.PerEpoch[d.Epoch] = c
		d.Total.Leased += k
		d.advance()
		d.skipResumed()
	}
	l.Done = d.allOut()
	l.AllProduced = d.AllProduced()
	d.LastLease[worker] = LeaseRecord{RequestID: requestID, Lease: l.Clone()}
	return l
}

// passAhead moves the cursor over the splits taken ahead of it that it
// has reached, so that Next is always a split not handed out (or
// NumSplits), and drops Ahead once empty.
func (d *DynamicState) passAhead() {
	for d.Next < d.NumSplits && d.Ahead[d.Next] {
		delete(d.Ahead, d.Next)
		d.Next++
	}
	if len(d.Ahead) == 0 {
		d.Ahead = nil
	}
}

// handedOut reports whether split s of epoch e has been handed out (or
// settled without being leased, as a resumed job's skipped splits).
func (d *DynamicState) handedOut(e, s int64) bool {
	return e < d.Epoch || s < d.Next || d.Ahead[s] || d.done()
}

// leasedInEpoch is how many splits of the current epoch have been handed
// out: those before the cursor and those taken ahead of it.
func (d *DynamicState) leasedInEpoch() int64 { return d.Next + int64(len(d.Ahead)) }

// advance moves to the next epoch once the current one is handed out, if
// another remains.
func (d *DynamicState) advance() {
	if d.Next == d.NumSplits && !d.done() {
		d.Epoch++
		d.Next = 0
		d.PerEpoch[d.Epoch] = Counts{}
		d.prune(d.Epoch - 1)
	}
}

// Finish records that worker finished splits of epoch. Every split must be
// outstanding for worker in that epoch and listed once; otherwise Finish
// returns an error wrapping ErrNotLeased (or naming the duplicate) and
// changes nothing.
func (d *DynamicState) Finish(worker string, epoch int64, splits []int64) error {
	if d.Exact != nil {
		return fmt.Errorf("%w: Finish on an exactly-once job (Produce)", ErrExactlyOnce)
	}
	if len(splits) == 0 {
		return nil
	}
	out := d.Outstanding[epoch]
	seen := make(map[int64]struct{}, len(splits))
	for _, s := range splits {
		if _, dup := seen[s]; dup {
			return fmt.Errorf("finish epoch %d: split %d listed twice", epoch, s)
		}
		seen[s] = struct{}{}
		holder, ok := out[s]
		if !ok {
			return fmt.Errorf("%w: split %d of epoch %d is not outstanding (never leased, finished or lost)", ErrNotLeased, s, epoch)
		}
		if holder != worker {
			return fmt.Errorf("%w: split %d of epoch %d is leased to %q, not %q", ErrNotLeased, s, epoch, holder, worker)
		}
	}
	for _, s := range splits {
		delete(out, s)
	}
	k := int64(len(splits))
	c := d.PerEpoch[epoch]
	c.Finished += k
	d.PerEpoch[epoch] = c
	d.Total.Finished += k
	if len(out) == 0 {
		delete(d.Outstanding, epoch)
	}
	d.prune(epoch)
	return nil
}

// Expire declares worker dead: its outstanding leases, in every epoch,
// become lost and are never handed out again in their epoch (at-most-once).
// It returns the lost split ids ordered by epoch, then id; a worker holding
// the same split in two overlapping epochs lists it twice. The worker's
// retry record is dropped, so if it comes back its next request is new.
// An exactly-once job takes ExpireWorker instead; Expire on one changes
// nothing and returns nil.
func (d *DynamicState) Expire(worker string) (lost []int64) {
	if d.Exact != nil {
		return nil
	}
	delete(d.LastLease, worker)
	for _, e := range slices.Sorted(maps.Keys(d.Outstanding)) {
		out := d.Outstanding[e]
		var mine []int64
		for s, w := range out {
			if w == worker {
				mine = append(mine, s)
			}
		}
		if len(mine) == 0 {
			continue
		}
		slices.Sort(mine)
		for _, s := range mine {
			delete(out, s)
		}
		k := int64(len(mine))
		c := d.PerEpoch[e]
		c.Lost += k
		d.PerEpoch[e] = c
		d.Total.Lost += k
		if len(out) == 0 {
			delete(d.Outstanding, e)
		}
		d.prune(e)
		lost = append(lost, mine...)
	}
	return lost
}

// prune drops the counts of an earlier epoch with nothing outstanding.
func (d *DynamicState) prune(epoch int64) {
	if x := d.Exact; x != nil && (len(x.Produced[epoch]) > 0 || len(x.Orphaned[epoch]) > 0) {
		return
	}
	if epoch < d.Epoch && len(d.Outstanding[epoch]) == 0 && len(d.HandedBack[epoch]) == 0 {
		delete(d.PerEpoch, epoch)
		if d.Exact != nil {
			// What departures left unreceipted in an epoch that has
			// ended stays counted abandoned: later receipts of it are
			// not expected, and the map must not grow epoch after epoch.
			delete(d.Exact.Unreceipted, epoch)
		}
	}
}

// Clone returns a deep copy.
func (d *DynamicState) Clone() *DynamicState {
	if d == nil {
		return nil
	}
	c := *d
	c.Outstanding = make(map[int64]map[int64]string, len(d.Outstanding))
	for e, out := range d.Outstanding {
		c.Outstanding[e] = maps.Clone(out)
	}
	c.PerEpoch = maps.Clone(d.PerEpoch)
	if d.HandedBack != nil {
		c.HandedBack = make(map[int64]map[int64]bool, len(d.HandedBack))
		for e, m := range d.HandedBack {
			c.HandedBack[e] = maps.Clone(m)
		}
	}
	c.Ahead = maps.Clone(d.Ahead)
	c.Exact = d.Exact.clone()
	c.Resume = d.Resume.clone()
	c.LastLease = make(map[string]LeaseRecord, len(d.LastLease))
	for w, r := range d.LastLease {
		r.Lease = r.Lease.Clone()
		c.LastLease[w] = r
	}
	return &c
}
