package client

import (
	"fmt"
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/internal/order"
)

// The visitation audit of a deterministic job (docs/jobs/deterministic-order.md,
// "The visitation audit"): per epoch, a digest (order.Digest: a count and
// four lanes of keyed hashes, order-independent and additive) of the
// element ids of the batches Next returned, which a checkpoint carries to
// the resumed run. Iterator.Audit reports it beside the digest of every
// element of the epoch, which the layout alone gives: a complete epoch
// whose digests differ lost or repeated an element.

// MaxAuditEpochs bounds the epochs whose digest an iterator keeps (the
// latest) and a checkpoint carries.
const MaxAuditEpochs = 64

// EpochAudit is one epoch's visitation audit.
type EpochAudit struct {
	Epoch int64 `json:"epoch"`
	// Elements is how many elements the batches returned in the epoch
	// held; Digest their digest.
	Elements uint64 `json:"elements"`
	Digest   string `json:"digest"`
	// Complete: the epoch's last batch was returned. Expected (complete
	// epochs) is the digest of every element of the epoch, and Match
	// whether Digest is it.
	Complete bool   `json:"complete"`
	Expected string `json:"expected,omitempty"`
	Match    bool   `json:"match"`
}

// auditEntry is an epoch's digest in a checkpoint.
type auditEntry struct {
	Epoch  int64  `cbor:"1,keyasint"`
	Digest []byte `cbor:"2,keyasint"`
}

// digestKey is the key of epoch's digests.
func (r *orderedRun) digestKey(epoch int64) uint64 {
	return order.DigestKey(r.plan.Seed, uint64(epoch))
}

// audit adds the elements of x, the cursor's batch, to its epoch's digest.
func (r *orderedRun) audit(x item) error {
	e, w := r.cur.epoch, r.cur.w
	if r.ids == nil || r.idsAt != (okey{epoch: e, w: w}) {
		ids, err := r.layout.Window(w)
		if err != nil {
			return err
		}
		r.ids, r.idsAt = ids, okey{epoch: e, w: w}
	}
	d := r.digests[e]
	key := r.digestKey(e)
	for _, p := range x.prov {
		if p.Lo < 0 || p.Hi > int64(len(r.ids)) || p.Lo > p.Hi {
			return fmt.Errorf("deterministic order: a batch of window %d names positions [%d, %d) of %d", w, p.Lo, p.Hi, len(r.ids))
		}
		for _, id := range r.ids[p.Lo:p.Hi] {
			d.Add(key, 0, id)
		}
	}
	r.digests[e] = d
	for len(r.digests) > MaxAuditEpochs {
		delete(r.digests, slices.Min(slices.Collect(maps.Keys(r.digests))))
	}
	return nil
}

// report is the audit of every epoch it has a digest of, oldest first.
func (r *orderedRun) report() []EpochAudit {
	var out []EpochAudit
	for _, e := range slices.Sorted(maps.Keys(r.digests)) {
		d := r.digests[e]
		a := EpochAudit{Epoch: e, Elements: d.Count, Digest: d.String(), Complete: e < r.cur.epoch || r.done && e <= r.cur.epoch}
		if a.Complete {
			want := r.expected(e)
			a.Expected, a.Match = want.String(), want == d
		}
		out = append(out, a)
	}
	return out
}

// expected is the digest of every element of epoch e that the batches
// of the sequence hold, less the skipped batches (and, with
// drop_remainder, the rows it drops), from the layout alone: O(the
// epoch's elements).
func (r *orderedRun) expected(e int64) order.Digest {
	var d order.Digest
	key := r.digestKey(e)
	g, err := r.globalOf(okey{epoch: e})
	if err != nil {
		return d
	}
	l, err := r.plan.Layout(e)
	if err != nil {
		return d
	}
	b := r.plan.BatchSize
	for w := range l.Windows() {
		ids, err := l.Window(w)
		if err != nil {
			return d
		}
		for k := range r.plan.WindowBatches(l, w) {
			if !r.skips.Contains(g) {
				for _, id := range ids[k*b : min((k+1)*b, uint64(len(ids)))] {
					d.Add(key, 0, id)
				}
			}
			g++
		}
	}
	return d
}

// entries are the digests for a checkpoint.
func (r *orderedRun) entries() []auditEntry {
	var out []auditEntry
	for _, e := range slices.Sorted(maps.Keys(r.digests)) {
		b, _ := r.digests[e].MarshalBinary()
		out = append(out, auditEntry{Epoch: e, Digest: b})
	}
	return out
}

// restore takes a checkpoint's digests.
func (r *orderedRun) restore(es []auditEntry) error {
	if len(es) > MaxAuditEpochs {
		return fmt.Errorf("%w: %d epochs of audit, more than %d", ErrBadCheckpoint, len(es), MaxAuditEpochs)
	}
	for _, a := range es {
		var d order.Digest
		if err := d.UnmarshalBinary(a.Digest); err != nil {
			return fmt.Errorf("%w: audit of epoch %d: %v", ErrBadCheckpoint, a.Epoch, err)
		}
		r.digests[a.Epoch] = d
	}
	return nil
}

// Audit is a deterministic job's visitation audit, per epoch (the latest
// MaxAuditEpochs), of what Next returned here and before the checkpoint
// this iterator resumed from; nil for other jobs.
func (it *Iterator) Audit() []EpochAudit {
	if it.ord == nil {
		return nil
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.ord.report()
}
