package order

import (
	"errors"
	"fmt"
)

// Layout is one epoch's global order of a dataset of N elements: the
// element at each global position [0, N). It is the block shuffle:
//
//   - element ids are cut into blocks of Block consecutive ids (the last
//     may be shorter): a block is read sequentially, so reads stay as
//     sequential as Block allows (align it with row groups or file
//     chunks);
//   - the blocks are permuted, differently each epoch;
//   - consecutive permuted blocks are grouped into windows of Window
//     blocks, and the elements of a window are permuted among themselves.
//
// So position p is in window p / (Window·Block) (a little less after the
// short block), a worker producing a window reads its Window blocks and
// holds at most Window·Block elements (the bound a buffer shuffle's
// buffer had), and every element of the epoch appears exactly once.
// Everything is a function of (Seed, Epoch, N, Block, Window). The zero
// Layout is not usable; build one with NewLayout.
type Layout struct {
	n, block, window uint64
	nblocks          uint64
	short            uint64 // length of the last block (== block if none is short)
	shortSlot        uint64 // slot (permuted place) of the last block
	blocks           Perm
	seed, epoch      uint64
}

// Layout bounds.
const (
	// MaxBlock bounds a block's elements.
	MaxBlock = 1 << 32
	// MaxWindowElems bounds a window's elements (Window·Block): what a
	// worker holds to produce one.
	MaxWindowElems = 1 << 32
)

// ErrLayout: parameters that make no layout.
var ErrLayout = errors.New("order: bad layout")

// NewLayout returns the layout of epoch of n elements.
func NewLayout(n, block, window, seed, epoch uint64) (Layout, error) {
	switch {
	case n == 0 || n > MaxPermSize:
		return Layout{}, fmt.Errorf("%w: %d elements", ErrLayout, n)
	case block == 0 || block > MaxBlock:
		return Layout{}, fmt.Errorf("%w: block of %d elements (want 1 to %d)", ErrLayout, block, uint64(MaxBlock))
	case window == 0 || window > MaxWindowElems/block:
		return Layout{}, fmt.Errorf("%w: window of %d blocks of %d (want 1 to %d elements)", ErrLayout, window, block, uint64(MaxWindowElems))
	}
	nb := (n + block - 1) / block
	bp, err := NewPerm(nb, Key(seed, labelBlocks, epoch))
	if err != nil {
		return Layout{}, err
	}
	l := Layout{n: n, block: block, window: window, nblocks: nb, blocks: bp, seed: seed, epoch: epoch}
	l.short = n - (nb-1)*block
	l.shortSlot = bp.Inv(nb - 1)
	return l, nil
}

// Len is the number of positions (elements).
func (l Layout) Len() uint64 { return l.n }

// Block is the elements per block (the last block may have fewer).
func (l Layout) Block() uint64 { return l.block }

// Windows is the number of windows.
func (l Layout) Windows() uint64 { return (l.nblocks + l.window - 1) / l.window }

// deficit is how many elements the short block lacks.
func (l Layout) deficit() uint64 { return l.block - l.short }

// WindowStart is the first position of window w (w <= Windows(); the
// start of window Windows() is Len()).
func (l Layout) WindowStart(w uint64) uint64 {
	if w >= l.Windows() {
		return l.n
	}
	s := w * l.window * l.block
	if w > l.shortSlot/l.window {
		s -= l.deficit()
	}
	return s
}

// WindowLen is the number of positions of window w.
func (l Layout) WindowLen(w uint64) uint64 { return l.WindowStart(w+1) - l.WindowStart(w) }

// WindowOf is the window of position p (p < Len()).
func (l Layout) WindowOf(p uint64) uint64 {
	wb := l.window * l.block
	ws := l.shortSlot / l.window
	if p >= (ws+1)*wb-l.deficit() {
		return (p + l.deficit()) / wb
	}
	return p / wb
}

func (l Layout) windowPerm(w uint64) Perm {
	p, err := NewPerm(l.WindowLen(w), Key(l.seed, labelWindow, l.epoch, w))
	if err != nil { // unreachable: a window has at least one element
		return Perm{n: 1}
	}
	return p
}

// Read is one sequential read of a window: Len element ids from First.
type Read struct {
	Block uint64 // the block (its ids are Block·block onwards)
	First uint64 // first element id
	Len   uint64
}

// Reads are the blocks window w reads, in slot order: a worker reads each
// sequentially.
func (l Layout) Reads(w uint64) []Read {
	first := w * l.window
	last := min(first+l.window, l.nblocks)
	out := make([]Read, 0, last-first)
	for s := first; s < last; s++ {
		b := l.blocks.At(s)
		n := l.block
		if b == l.nblocks-1 {
			n = l.short
		}
		out = append(out, Read{Block: b, First: b * l.block, Len: n})
	}
	return out
}

// At is the element id at position p (p < Len()).
func (l Layout) At(p uint64) (uint64, error) {
	if p >= l.n {
		return 0, fmt.Errorf("%w: position %d of %d", ErrLayout, p, l.n)
	}
	w := l.WindowOf(p)
	return l.inWindow(w, l.windowPerm(w).At(p-l.WindowStart(w))), nil
}

// inWindow is the element at offset q of window w's blocks laid end to
// end in slot order.
func (l Layout) inWindow(w, q uint64) uint64 {
	// q is an offset into the window's blocks laid end to end in slot
	// order; only the short block (if in this window) is not Block long.
	slot0 := w * l.window
	k, off := q/l.block, q%l.block
	if ls := l.shortSlot; ls/l.window == w {
		lk := ls - slot0
		switch {
		case q < lk*l.block:
		case q < lk*l.block+l.short:
			k, off = lk, q-lk*l.block
		default:
			r := q - lk*l.block - l.short
			k, off = lk+1+r/l.block, r%l.block
		}
	}
	return l.blocks.At(slot0+k)*l.block + off
}

// PositionOf is the inverse of At: the position of element id.
func (l Layout) PositionOf(id uint64) (uint64, error) {
	if id >= l.n {
		return 0, fmt.Errorf("%w: element %d of %d", ErrLayout, id, l.n)
	}
	b, off := id/l.block, id%l.block
	slot := l.blocks.Inv(b)
	w := slot / l.window
	lk := slot - w*l.window
	q := lk*l.block + off
	if ls := l.shortSlot; ls/l.window == w && ls < slot {
		q -= l.deficit()
	}
	return l.WindowStart(w) + l.windowPerm(w).Inv(q), nil
}

// Window returns the element ids of window w in position order: what a
// worker emits for it, having read Reads(w). O(WindowLen(w)).
func (l Layout) Window(w uint64) ([]uint64, error) {
	if w >= l.Windows() {
		return nil, fmt.Errorf("%w: window %d of %d", ErrLayout, w, l.Windows())
	}
	n := l.WindowLen(w)
	wp := l.windowPerm(w)
	reads := l.Reads(w)
	// The window's elements laid end to end in slot order, then permuted.
	flat := make([]uint64, 0, n)
	for _, r := range reads {
		for k := range r.Len {
			flat = append(flat, r.First+k)
		}
	}
	out := make([]uint64, n)
	for j := range n {
		out[j] = flat[wp.At(j)]
	}
	return out, nil
}

// WindowsOfBatches returns the windows [first, last] that hold the
// positions of global batches [g0, g1) of size elements each (the last
// batch of the epoch may be short): the windows a consumer needs produced
// to assemble them. ok is false when the batches are past the end.
func (l Layout) WindowsOfBatches(g0, g1, size uint64) (first, last uint64, ok bool) {
	if size == 0 {
		return 0, 0, false
	}
	nb := l.n / size // batches of the epoch, without overflow for any size
	if l.n%size != 0 {
		nb++
	}
	if g1 <= g0 || g0 >= nb {
		return 0, 0, false
	}
	g1 = min(g1, nb)
	p0 := g0 * size
	p1 := min(g1*size, l.n) - 1
	return l.WindowOf(p0), l.WindowOf(p1), true
}
