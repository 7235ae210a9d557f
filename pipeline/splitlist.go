package pipeline

import "github.com/feedmesh/feedmesh/pipeline/formats"

// SplitList is a dataset's splits by ID, as Splits enumerates them. For
// range and synthetic sources it computes a split when asked instead of
// holding the list: a worker leasing splits of a range of 16 M elements in
// splits of 64 would otherwise build a 10 MiB list when its task starts
// (and the GC scan it for as long as the task runs).
type SplitList struct {
	all   []Split
	index *formats.IndexSplitter
}

// ListSplits is Splits, computed on demand where the source allows.
func ListSplits(spec *Spec) (SplitList, error) {
	c, err := compile(spec, spec.files())
	if err != nil {
		return SplitList{}, err
	}
	if c.source.index != nil {
		x, err := c.source.index()
		if err != nil {
			return SplitList{}, err
		}
		return SplitList{index: &x}, nil
	}
	all, err := c.source.splits()
	if err != nil {
		return SplitList{}, err
	}
	return SplitList{all: all}, nil
}

// SplitListOf is a list of the splits given (each at position ID).
func SplitListOf(all []Split) SplitList { return SplitList{all: all} }

// Len is how many splits there are.
func (l SplitList) Len() int64 {
	if l.index != nil {
		return l.index.Len()
	}
	return int64(len(l.all))
}

// ByID returns split id; false if there is none of that ID.
func (l SplitList) ByID(id int64) (Split, bool) {
	if id < 0 || id >= l.Len() {
		return Split{}, false
	}
	if l.index != nil {
		return l.index.At(id), true
	}
	if l.all[id].ID != id {
		return Split{}, false
	}
	return l.all[id], true
}

// at is the split at position i (0 <= i < Len): split i for a whole
// dataset's list, the i-th given to SplitListOf otherwise.
func (l SplitList) at(i int64) Split {
	if l.index != nil {
		return l.index.At(i)
	}
	return l.all[i]
}

// All returns every split, in ID order (built on each call for range and
// synthetic sources: for the sharding policies that read them all).
func (l SplitList) All() []Split {
	if l.index == nil {
		return l.all
	}
	out := make([]Split, l.Len())
	for i := range out {
		out[i] = l.index.At(int64(i))
	}
	return out
}
