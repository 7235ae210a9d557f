package order

import "fmt"

// Share is consumer I of N's part of an epoch's batch sequence, by
// Mosaic's rule (and Cut's): the epoch's global batches are numbered g =
// 0, 1, … window by window (batch k of window w is positions [k·B,
// (k+1)·B) of the window: a batch never spans two windows), and global
// batch g goes to consumer g mod N as its (g div N)-th. A share keeps the
// layout's windows, each cut down to the consumer's batches of it: its
// window w is the positions of those batches, in order, so a worker
// producing it reads the window's blocks (those holding them) and
// batches what it yields on the same boundaries. Everything is a
// function of (layout, B, drop, I, N); the consumers' shares are disjoint
// and together the epoch. N 0 or 1 is the whole layout. The global batch
// counts need no replicated state: without ops that change counts, a
// window's batch count is its length's (the layout's).
type Share struct {
	L    Layout
	I, N uint64
	// B is the batch size (1: elements), Drop whether a window's short
	// last batch is dropped (drop_remainder).
	B    uint64
	Drop bool
}

// ShareOf is consumer i of n's share of l under batches of b (0: 1).
func ShareOf(l Layout, i, n, b uint64, drop bool) (Share, error) {
	if n == 0 {
		n = 1
	}
	if n > MaxConsumers || i >= n {
		return Share{}, fmt.Errorf("%w: consumer %d of %d", ErrCut, i, n)
	}
	s := Share{L: l, I: i, N: n, B: max(b, 1), Drop: drop}
	if g := s.GlobalBatches(l.Windows()); n > 1 && n > g {
		return Share{}, fmt.Errorf("%w: consumer %d of %d: the epoch has %d batches, fewer than the consumers", ErrCut, i, n, g)
	}
	return s, nil
}

// Windows is the number of windows (the layout's; some may hold none of
// the consumer's batches when they have fewer than N).
func (s Share) Windows() uint64 { return s.L.Windows() }

// batchesOf is how many batches a window of n positions has.
func (s Share) batchesOf(n uint64) uint64 {
	if s.Drop {
		return n / s.B
	}
	return (n + s.B - 1) / s.B
}

// GlobalBatches is how many global batches windows [0, w) have: the
// global number of window w's batch 0. O(1): every window but the one
// with the short block and the last is Window·Block long.
func (s Share) GlobalBatches(w uint64) uint64 {
	w = min(w, s.L.Windows())
	full := s.batchesOf(s.L.window * s.L.block)
	g := w * full
	last := s.L.Windows() - 1
	if ws := s.L.shortSlot / s.L.window; ws < w && ws != last {
		g -= full - s.batchesOf(s.L.WindowLen(ws))
	}
	if last < w {
		g -= full - s.batchesOf(s.L.WindowLen(last))
	}
	return g
}

// batches are the window batches of w that are the consumer's: k0, k0+N,
// … below nb.
func (s Share) batches(w uint64) (k0, count, nb uint64) {
	nb = s.batchesOf(s.L.WindowLen(w))
	n := max(s.N, 1)
	k0 = (s.I + n - s.GlobalBatches(w)%n) % n
	if k0 >= nb {
		return k0, 0, nb
	}
	return k0, (nb - k0 + n - 1) / n, nb
}

// WindowLen is the number of the consumer's positions in window w.
func (s Share) WindowLen(w uint64) uint64 {
	if w >= s.Windows() {
		return 0
	}
	if s.N <= 1 {
		return s.L.WindowLen(w)
	}
	k0, c, _ := s.batches(w)
	if c == 0 {
		return 0
	}
	wl := s.L.WindowLen(w)
	lastK := k0 + (c-1)*max(s.N, 1)
	return (c-1)*s.B + min(s.B, wl-lastK*s.B)
}

// Window is the element ids of the consumer's positions of window w, in
// order: its batches' positions.
func (s Share) Window(w uint64) ([]uint64, error) {
	ids, err := s.L.Window(w)
	if err != nil || s.N <= 1 {
		return ids, err
	}
	k0, c, _ := s.batches(w)
	out := make([]uint64, 0, s.WindowLen(w))
	for j := range c {
		k := k0 + j*max(s.N, 1)
		out = append(out, ids[k*s.B:min((k+1)*s.B, uint64(len(ids)))]...)
	}
	return out, nil
}

// Reads are the blocks of window w that hold the consumer's positions.
func (s Share) Reads(w uint64) []Read {
	all := s.L.Reads(w)
	if s.N <= 1 {
		return all
	}
	ids, err := s.Window(w)
	if err != nil {
		return nil
	}
	need := make(map[uint64]bool, len(all))
	for _, id := range ids {
		need[id/s.L.block] = true
	}
	out := all[:0]
	for _, r := range all {
		if need[r.Block] {
			out = append(out, r)
		}
	}
	return out
}

// Block is the layout's block.
func (s Share) Block() uint64 { return s.L.Block() }
