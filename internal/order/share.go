package order

import "fmt"

// Share is consumer I of N's part of a layout: the windows w with
// w mod N == I, in window order, numbered 0, 1, … (its local window s is
// the layout's window s·N+I). The zero N, and N == 1, is the whole
// layout. It is the rule deterministic order cuts consumers by
// (docs/jobs/deterministic-order.md, "Consumer i of N"): a function of
// (layout, I, N) alone, so each consumer's sequence is a function of
// (spec, seed, epoch, I, N); the consumers' shares are disjoint and
// together the layout, and consumer w mod N's local window w div N is
// the layout's window w.
type Share struct {
	L    Layout
	I, N uint64
}

// ShareOf is consumer i of n's share of l; an error when i is not in
// [0, n), n is over MaxConsumers, or the share has no window (the epoch
// has fewer windows than n).
func ShareOf(l Layout, i, n uint64) (Share, error) {
	if n == 0 {
		n = 1
	}
	if n > MaxConsumers || i >= n {
		return Share{}, fmt.Errorf("%w: consumer %d of %d", ErrCut, i, n)
	}
	s := Share{L: l, I: i, N: n}
	if s.Windows() == 0 {
		return Share{}, fmt.Errorf("%w: consumer %d of %d has no window: the epoch has %d windows (make order_window smaller or use fewer consumers)", ErrCut, i, n, l.Windows())
	}
	return s, nil
}

// Windows is the number of the share's windows.
func (s Share) Windows() uint64 {
	w, n := s.L.Windows(), max(s.N, 1)
	if s.I >= w {
		return 0
	}
	return (w - s.I + n - 1) / n
}

// Global is the layout's window of the share's window w.
func (s Share) Global(w uint64) uint64 { return w*max(s.N, 1) + s.I }

// WindowLen is the number of positions of the share's window w.
func (s Share) WindowLen(w uint64) uint64 {
	if w >= s.Windows() {
		return 0
	}
	return s.L.WindowLen(s.Global(w))
}

// Window is the element ids of the share's window w in position order.
func (s Share) Window(w uint64) ([]uint64, error) {
	if w >= s.Windows() {
		return nil, fmt.Errorf("%w: window %d of consumer %d's %d", ErrLayout, w, s.I, s.Windows())
	}
	return s.L.Window(s.Global(w))
}

// Reads are the blocks the share's window w reads.
func (s Share) Reads(w uint64) []Read { return s.L.Reads(s.Global(w)) }

// Block is the layout's block.
func (s Share) Block() uint64 { return s.L.Block() }
