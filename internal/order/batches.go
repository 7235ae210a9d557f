package order

import (
	"errors"
	"fmt"
	"sort"
)

// Batches numbers an epoch's global batches when the number of batches a
// window yields is known only once it is produced (a filter, pack or
// bucketing upstream of the batching): windows are committed in window
// order with their batch counts, and global batch g is the
// (g − prefix)-th batch of the window where the prefix sums reach g. A
// window's batches can be numbered once every window before it is
// committed; a worker that finishes a window early holds its batches
// until then (at most the lookahead).
//
// When counts are static (no op changes them and a window's elements are
// a multiple of the batch), NewStaticBatches numbers everything at once.
// Build one with NewBatches, NewBatchesFrom or NewStaticBatches (the zero
// Batches is not usable).
type Batches struct {
	base   uint64   // the first window numbered (an Anchor's)
	prefix []uint64 // prefix[j]: batches before window base+j; len = committed+1
	static uint64   // batches per window when static (0: committed counts)
	total  uint64   // static: batches of the epoch
}

// ErrBatches: a commit out of order, or a batch outside what is known.
var ErrBatches = errors.New("order: bad batch numbering")

// MaxWindows bounds the windows of an epoch that Batches numbers.
const MaxWindows = 1 << 22

// Anchor ties the numbering to a window: window Window's first batch is
// global batch Batch. A consumer's checkpoint carries the anchor of the
// window holding its next batch, so a resumed job numbers from there
// without producing the windows before it again; of several consumers'
// anchors the one of the lowest window serves them all.
type Anchor struct {
	Window uint64
	Batch  uint64
}

// NewBatches returns the numbering of an epoch with no window committed.
func NewBatches() *Batches { return &Batches{prefix: []uint64{0}} }

// NewBatchesFrom returns the numbering that starts at the anchor: windows
// before it are not numbered.
func NewBatchesFrom(a Anchor) (*Batches, error) {
	if a.Window >= MaxWindows || a.Batch > MaxPermSize {
		return nil, fmt.Errorf("%w: anchor %+v", ErrBatches, a)
	}
	return &Batches{base: a.Window, prefix: []uint64{a.Batch}}, nil
}

// Anchor is the anchor of window w (ok once the windows before it are
// committed).
func (b *Batches) Anchor(w uint64) (Anchor, bool) {
	g, ok := b.Global(w, 0)
	if !ok && b.static == 0 && w >= b.base && w-b.base < uint64(len(b.prefix)) {
		// w is committed empty or is the next: its first batch's number
		// is its prefix all the same.
		g, ok = b.prefix[w-b.base], true
	}
	return Anchor{Window: w, Batch: g}, ok
}

// NewStaticBatches numbers an epoch whose every window yields per batches
// and which has total batches in all (the last window may yield fewer).
func NewStaticBatches(per, total uint64) (*Batches, error) {
	if per == 0 || total > MaxPermSize {
		return nil, fmt.Errorf("%w: %d batches per window, %d in all", ErrBatches, per, total)
	}
	return &Batches{static: per, total: total}, nil
}

// Commit records that window w yielded count batches; w must be the next
// window.
func (b *Batches) Commit(w, count uint64) error {
	if b.static != 0 {
		return fmt.Errorf("%w: static numbering takes no commits", ErrBatches)
	}
	next := uint64(len(b.prefix) - 1)
	switch {
	case w != b.base+next:
		return fmt.Errorf("%w: window %d committed, the next is %d", ErrBatches, w, b.base+next)
	case b.base+next >= MaxWindows:
		return fmt.Errorf("%w: more than %d windows", ErrBatches, MaxWindows)
	case count > MaxPermSize-b.prefix[next]:
		return fmt.Errorf("%w: more than 2^62 batches", ErrBatches)
	}
	b.prefix = append(b.prefix, b.prefix[next]+count)
	return nil
}

// Next is the window to commit next (static: the number of windows).
func (b *Batches) Next() uint64 {
	if b.static != 0 {
		return (b.total + b.static - 1) / b.static
	}
	return b.base + uint64(len(b.prefix)-1)
}

// Known is how many global batches are numbered.
func (b *Batches) Known() uint64 {
	if b.static != 0 {
		return b.total
	}
	return b.prefix[len(b.prefix)-1]
}

// Global is the global batch number of window w's k-th batch; ok is false
// while a window before w is not committed, or when w is committed with
// fewer batches.
func (b *Batches) Global(w, k uint64) (g uint64, ok bool) {
	if b.static != 0 {
		if k >= b.static || w > MaxPermSize/b.static {
			return 0, false
		}
		g = w*b.static + k
		return g, g < b.total
	}
	if w < b.base || w-b.base >= uint64(len(b.prefix)) || k > MaxPermSize {
		return 0, false
	}
	j := w - b.base
	g = b.prefix[j] + k
	if j+1 < uint64(len(b.prefix)) && g >= b.prefix[j+1] {
		return 0, false
	}
	return g, true
}

// Locate is the window and index in it of global batch g; ok is false
// when g is not numbered yet.
func (b *Batches) Locate(g uint64) (w, k uint64, ok bool) {
	if g >= b.Known() {
		return 0, 0, false
	}
	if b.static != 0 {
		return g / b.static, g % b.static, true
	}
	if g < b.prefix[0] {
		return 0, 0, false // before the anchor
	}
	// The last window whose prefix is <= g (empty windows share it).
	i := sort.Search(len(b.prefix), func(i int) bool { return b.prefix[i] > g }) - 1
	return b.base + uint64(i), g - b.prefix[i], true
}
