package splits

// Progress is a summary of a DynamicState for status pages (`feedmesh
// jobs`).
type Progress struct {
	// NumSplits and Epochs are the job's (Epochs 0: forever).
	NumSplits int64 `json:"num_splits"`
	Epochs    int64 `json:"epochs"`
	// Epoch is the epoch being handed out.
	Epoch int64 `json:"epoch"`
	// Total counts every epoch; Current counts Epoch only.
	Total   Counts `json:"total"`
	Current Counts `json:"current"`
	// Outstanding is how many leases are neither finished nor lost, over
	// every epoch.
	Outstanding int64 `json:"outstanding"`
	// Waiting is how many splits handed back by draining workers wait to
	// be leased again.
	Waiting int64 `json:"waiting,omitempty"`
	// RemainingInEpoch is how many splits of Epoch are still to be handed
	// out.
	RemainingInEpoch int64 `json:"remaining_in_epoch"`
	// Remaining is how many splits of all epochs are still to be handed
	// out; -1 when the job repeats forever.
	Remaining int64 `json:"remaining"`
	// Done: everything is handed out. Complete: Done and nothing is
	// outstanding any more, so the job's data has ended.
	Done     bool `json:"done"`
	Complete bool `json:"complete"`
	// Exact is the exactly-once progress; nil for an at-most-once job.
	Exact *ExactProgress `json:"exact,omitempty"`
}

// Progress summarizes d.
func (d *DynamicState) Progress() Progress {
	p := Progress{
		NumSplits:        d.NumSplits,
		Epochs:           d.Epochs,
		Epoch:            d.Epoch,
		Total:            d.Total,
		Current:          d.PerEpoch[d.Epoch],
		RemainingInEpoch: d.NumSplits - d.leasedInEpoch(),
		Done:             d.allOut(),
	}
	for _, out := range d.Outstanding {
		p.Outstanding += int64(len(out))
	}
	for _, k := range d.handedBack() {
		p.Waiting += k
	}
	switch {
	case d.done():
		p.RemainingInEpoch, p.Remaining = 0, 0
	case d.Epochs == 0:
		p.Remaining = -1
	default:
		p.Remaining = (d.Epochs-1-d.Epoch)*d.NumSplits + p.RemainingInEpoch
	}
	p.Complete = d.Complete()
	p.Exact = d.Exact.progress()
	if p.Exact != nil {
		p.Exact.SettledBefore = d.SettledBefore()
		if r := d.Resume; r != nil {
			p.Exact.ResumeFrom, p.Exact.ResumeWant, p.Exact.ResumeHave = r.From, r.Want, len(r.Parts)
		}
	}
	return p
}

// ExactProgress summarizes the exactly-once part for status pages.
type ExactProgress struct {
	ExactCounts
	// Produced, Orphaned: splits in those states now; Fencing: expired
	// workers whose orphaned splits wait for consumers' fences.
	Produced int64 `json:"produced"`
	Orphaned int64 `json:"orphaned"`
	Fencing  int   `json:"fencing"`
	// SettledBefore is the first epoch not settled completely: every
	// split of every epoch before it was handed out and settled.
	SettledBefore int64 `json:"settled_before"`
	// ResumeFrom, ResumeWant, ResumeHave (a resumed job): the job the
	// checkpoints are of, how many it waits for, how many are in.
	ResumeFrom uint64 `json:"resume_from,omitempty"`
	ResumeWant int    `json:"resume_want,omitempty"`
	ResumeHave int    `json:"resume_have,omitempty"`
	// AtMostOnce: the job counts its loss with this bookkeeping
	// (ExactState.Census, census.go).
	AtMostOnce bool `json:"at_most_once,omitempty"`
}

func (x *ExactState) progress() *ExactProgress {
	if x == nil {
		return nil
	}
	p := &ExactProgress{ExactCounts: x.Counts, Fencing: len(x.Fences), AtMostOnce: x.Census}
	for _, m := range x.Produced {
		p.Produced += int64(len(m))
	}
	for _, m := range x.Orphaned {
		p.Orphaned += int64(len(m))
	}
	return p
}

// SettledBefore is the first epoch of an exactly-once job with a split
// not settled (not handed out, leased, produced or orphaned); Epochs once
// every split of every epoch is settled.
func (d *DynamicState) SettledBefore() int64 {
	if d.Waiting() {
		return 0
	}
	low := d.Epoch
	if d.done() {
		low = d.Epoch + 1
	}
	for e := range d.Outstanding {
		low = min(low, e)
	}
	if x := d.Exact; x != nil {
		for e := range x.Produced {
			low = min(low, e)
		}
		for e := range x.Orphaned {
			low = min(low, e)
		}
	}
	for e := range d.HandedBack {
		low = min(low, e)
	}
	return low
}
