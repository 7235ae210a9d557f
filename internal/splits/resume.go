package splits

import (
	"fmt"
	"math"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// Resuming an exactly-once DYNAMIC job from its consumers' checkpoints.
//
// A consumer's checkpoint holds a Delivered: what reached its trainer
// through it (the batches Next returned, not those prefetched). A job
// resumed from checkpoints starts with a ResumeState that waits until the
// checkpoints of Want consumers (its parts) are in, merged; then every
// split is handed out as usual except that what the parts delivered is
// excluded: a split delivered completely is skipped (counted in
// ExactCounts.Skipped), one delivered in part is leased with the delivered
// indices as Lease.Exclude, an epoch delivered completely is skipped
// whole. Together the parts and the resumed job deliver each element once
// per epoch.
//
// A Delivered is compact in the common case. While a consumer is the only
// one a job has ever had, every element of an epoch the cluster has
// settled went to it, so its checkpoint can say "every epoch before
// DoneBefore, except Missing" (the few elements it had received and not
// yet returned) instead of listing what it returned. With several
// consumers, each lists what it returned (Returned), per split: about one
// interval per batch it received.

// ResumeEnd is the open end of the exclusions a resumed split of a
// DoneBefore epoch gets: every index from its last missing one on.
const ResumeEnd = math.MaxInt64

// ResumeState is a resumed job's part of its DynamicState.
type ResumeState struct {
	// From is the job (its ID in the replicated state) the checkpoints were taken of.
	From uint64 `cbor:"1,keyasint" json:"from"`
	// Want is how many consumers' checkpoints the job waits for before it
	// hands out anything (the largest count a checkpoint named).
	Want int `cbor:"2,keyasint" json:"want"`
	// Parts are the consumers (of job From) whose checkpoints are in,
	// sorted.
	Parts []string `cbor:"3,keyasint" json:"parts"`
	// Prior is the parts merged, less what leases have consumed: a split
	// leased takes its entry away (into the exclusions).
	Prior ranges.Delivered `cbor:"4,keyasint" json:"prior"`
	// Expect are the consumers of job From that had elements delivered
	// (its ExactState.Receivers, when the cluster still held it), sorted:
	// the job waits for each one's checkpoint too. A count alone is not
	// enough: a consumer learns of the others from its heartbeats, so one
	// whose checkpoint was taken just after another consumer attached
	// counts too few, and a job resumed with its checkpoint first would
	// start without the other's and deliver again what that one returned.
	Expect []string `cbor:"5,keyasint,omitempty" json:"expect,omitempty"`
}

// sortedNames checks that names are sorted, distinct and at most limit.
func sortedNames(names []string, limit int) error {
	if len(names) > limit || !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		return fmt.Errorf("%d names, limit %d, must be sorted and distinct: %.200v", len(names), limit, names)
	}
	return nil
}

// ExpectParts makes a resumed job that has not started wait also for the
// checkpoints of consumers (sorted or not; at most jobspec.MaxResumeParts kept).
func (d *DynamicState) ExpectParts(consumers []string) {
	r := d.Resume
	if r == nil || len(consumers) == 0 {
		return
	}
	e := slices.Concat(r.Expect, consumers)
	slices.Sort(e)
	e = slices.Compact(e)
	r.Expect = e[:min(len(e), jobspec.MaxResumeParts)]
	r.Want = max(r.Want, len(r.Expect))
}

// NewDynamicResumed is NewDynamicExactlyOnce for a job resumed from the
// checkpoints of job from; it hands out nothing until AddPart has taken
// the first.
func NewDynamicResumed(numSplits, epochs int64, from uint64) *DynamicState {
	d := NewDynamicExactlyOnce(numSplits, epochs)
	d.Resume = &ResumeState{From: from, Want: 1}
	return d
}

// Waiting reports whether a resumed job still waits for checkpoints.
func (d *DynamicState) Waiting() bool {
	r := d.Resume
	if r == nil {
		return false
	}
	if len(r.Parts) < r.Want {
		return true
	}
	for _, c := range r.Expect {
		if _, in := slices.BinarySearch(r.Parts, c); !in {
			return true
		}
	}
	return false
}

// ErrResumed: a checkpoint came for a resumed job that has started.
var ErrResumed = fmt.Errorf("splits: the job has already resumed")

// AddPart merges the checkpoint of consumer part, which says the job had
// want consumers when it was taken. A part already in changes nothing
// (added false). A part that comes once the job has started (every part
// it waited for is in) is refused with ErrResumed: what it delivered may
// have been handed out again already.
func (d *DynamicState) AddPart(part string, want int, p ranges.Delivered) (added bool, err error) {
	r := d.Resume
	if r == nil {
		return false, fmt.Errorf("%w: the job was not created to resume", ErrResumed)
	}
	if _, ok := slices.BinarySearch(r.Parts, part); ok {
		return false, nil
	}
	if !d.Waiting() {
		return false, fmt.Errorf("%w from %d checkpoints; this one (consumer %s) came after the job started", ErrResumed, len(r.Parts), part)
	}
	if want < 1 || want > jobspec.MaxResumeParts {
		return false, fmt.Errorf("resume: a checkpoint of %d consumers, want 1 to %d", want, jobspec.MaxResumeParts)
	}
	if err := p.Validate(d.NumSplits, d.Epochs, jobspec.MaxEpochs, jobspec.MaxReceiptIntervals); err != nil {
		return false, err
	}
	if len(r.Parts) == 0 {
		r.Prior = p.Clone()
	} else {
		r.Prior.Merge(p)
	}
	i, _ := slices.BinarySearch(r.Parts, part)
	r.Parts = slices.Insert(r.Parts, i, part)
	r.Want = max(r.Want, want, len(r.Parts)) // more parts than Expect and counts named: all are in

	return true, nil
}

// takePrior is what the checkpoints say of split s of epoch e, which is
// being handed out: skip (delivered completely), or the indices to
// exclude (none: deliver all). It consumes the entry.
func (d *DynamicState) takePrior(e, s int64) (exclude ranges.Set, skip bool) {
	r := d.Resume
	if r == nil {
		return nil, false
	}
	if e < r.Prior.DoneBefore {
		miss, ok := ranges.Get(r.Prior.Missing, e, s)
		if !ok {
			return nil, true
		}
		ranges.Del(r.Prior.Missing, e, s)
		return complement(miss), false
	}
	ret, _ := ranges.Get(r.Prior.Returned, e, s)
	ranges.Del(r.Prior.Returned, e, s)
	return ret, false
}

// complement is every index from 0 on not in r (r not empty).
func complement(r ranges.Set) ranges.Set {
	var c ranges.Set
	lo := int64(0)
	for i := 0; i < len(r); i += 2 {
		if r[i] > lo {
			c = append(c, lo, r[i])
		}
		lo = r[i+1]
	}
	if lo < ResumeEnd {
		c = append(c, lo, ResumeEnd)
	}
	return c
}

// skipResumed hands out, as skipped, the splits at the head of the
// current epoch that the checkpoints say were delivered completely, and
// whole epochs that were. It stops at a split to lease, or at the end.
func (d *DynamicState) skipResumed() {
	r := d.Resume
	if r == nil {
		return
	}
	for !d.done() && d.Epoch < r.Prior.DoneBefore {
		if len(r.Prior.Missing[d.Epoch]) == 0 {
			// The whole rest of the epoch (less what went ahead of the
			// cursor, counted when it went).
			d.countSkipped(d.NumSplits - d.leasedInEpoch())
			d.Next, d.Ahead = d.NumSplits, nil
		} else if _, ok := r.Prior.Missing[d.Epoch][d.Next]; !ok {
			d.countSkipped(1)
			d.Next++
			d.passAhead()
		} else {
			return
		}
		d.advance()
	}
}

// countSkipped counts k splits handed out and settled at once.
func (d *DynamicState) countSkipped(k int64) {
	if k == 0 {
		return
	}
	c := d.PerEpoch[d.Epoch]
	c.Leased += k
	c.Finished += k
	d.PerEpoch[d.Epoch] = c
	d.Total.Leased += k
	d.Total.Finished += k
	d.Exact.Counts.Skipped += k
}

func (r *ResumeState) clone() *ResumeState {
	if r == nil {
		return nil
	}
	c := *r
	c.Parts = slices.Clone(r.Parts)
	c.Expect = slices.Clone(r.Expect)
	c.Prior = r.Prior.Clone()
	return &c
}

func (r *ResumeState) validate(d *DynamicState) error {
	if d.Exact == nil {
		return fmt.Errorf("resume: an at-most-once job")
	}
	if r.Want < 1 || r.Want > jobspec.MaxResumeParts || len(r.Parts) > r.Want || !slices.IsSorted(r.Parts) ||
		len(slices.Compact(slices.Clone(r.Parts))) != len(r.Parts) {
		return fmt.Errorf("resume: want %d, parts %v", r.Want, r.Parts)
	}
	if err := sortedNames(r.Expect, jobspec.MaxResumeParts); err != nil {
		return fmt.Errorf("resume: expected parts: %w", err)
	}
	if err := r.Prior.Validate(d.NumSplits, d.Epochs, jobspec.MaxEpochs, math.MaxInt); err != nil {
		return err
	}
	for _, m := range []map[int64]map[int64]ranges.Set{r.Prior.Missing, r.Prior.Returned} {
		for e, in := range m {
			for s := range in {
				if e < d.Epoch || (e == d.Epoch && (s < d.Next || d.Ahead[s])) {
					return fmt.Errorf("resume: checkpoint entry for split %d of epoch %d, handed out already", s, e)
				}
			}
		}
	}
	return nil
}
