package pipeline

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/feedmesh/feedmesh/internal/order"
	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/tensor"
)

// Deterministic order (Spec.Order; docs/jobs/deterministic-order.md).
// Under order: deterministic the source's splits are the epoch's windows
// (order.Layout): split w of epoch e yields the elements of window w of
// e's block shuffle, in the window's order, read a block at a time from
// the underlying source (addressed by element index). A batch never spans
// two windows (batchIter.splitLocal), so a window's batches are a
// function of (spec, Seed, epoch, w) alone, whichever worker makes them,
// and the consumer reassembles them in window order (client's reorder
// buffer) from their provenance: batch k of window w holds positions
// [k·size, (k+1)·size) of the window.

// The values of Spec.Order.
const (
	OrderAny           = "any"
	OrderDeterministic = "deterministic"
)

// Defaults and bounds of deterministic order.
const (
	DefaultOrderBlock  = 256
	DefaultOrderWindow = 16
	// MaxOrderWindowElements bounds OrderBlock·OrderWindow: a worker holds
	// a window's elements while it produces it.
	MaxOrderWindowElements = 1 << 20
)

// normalizeOrder writes s's order into out in canonical form: "" for any
// (without block and window: they apply under deterministic order only,
// which a consumer may set after the spec is parsed: JobOptions.Order),
// block and window defaults for deterministic.
func normalizeOrder(s, out *Spec) {
	out.Order = strings.ToLower(strings.TrimSpace(s.Order))
	if out.Order == OrderAny {
		out.Order = ""
	}
	out.OrderBlock, out.OrderWindow, out.OrderConsumers, out.OrderConsumer = 0, 0, 0, 0
	if out.Order == OrderDeterministic {
		out.OrderBlock, out.OrderWindow = s.OrderBlock, s.OrderWindow
		if s.OrderConsumers > 1 {
			out.OrderConsumers, out.OrderConsumer = s.OrderConsumers, s.OrderConsumer
		} else if s.OrderConsumers != 1 || s.OrderConsumer != 0 {
			out.OrderConsumers, out.OrderConsumer = s.OrderConsumers, s.OrderConsumer // checkOrderFields refuses
		}
		if out.OrderBlock == 0 {
			out.OrderBlock = DefaultOrderBlock
		}
		if out.OrderWindow == 0 {
			out.OrderWindow = DefaultOrderWindow
		}
	}
}

// checkOrderFields reports an order a spec cannot have.
func checkOrderFields(n *Spec, add func(path, format string, args ...any)) {
	switch n.Order {
	case "", OrderDeterministic:
	default:
		add("order", "%q: want any or deterministic", n.Order)
		return
	}
	if n.Order == "" {
		return
	}
	switch {
	case n.OrderBlock <= 0 || n.OrderWindow <= 0:
		add("order_block", "order_block and order_window must be > 0")
	case n.OrderBlock > MaxOrderWindowElements/n.OrderWindow:
		add("order_window", "order_block·order_window is %d·%d elements, over the bound of %d a worker holds per window",
			n.OrderBlock, n.OrderWindow, MaxOrderWindowElements)
	}
	switch {
	case n.OrderConsumers < 0 || n.OrderConsumers > order.MaxConsumers:
		add("order_consumers", "%d: want 1 to %d", n.OrderConsumers, order.MaxConsumers)
	case n.OrderConsumer < 0 || n.OrderConsumer >= max(n.OrderConsumers, 1):
		add("order_consumer", "%d: want 0 to order_consumers-1 (%d)", n.OrderConsumer, max(n.OrderConsumers, 1)-1)
	}
}

// validateOrder checks a deterministic spec's source and ops, and returns
// its source as windows (orderedSource); src itself on a problem.
func validateOrder(n *Spec, src *compiledSource, add func(path, format string, args ...any)) *compiledSource {
	if src.index == nil {
		add("order", "deterministic: reads range and synthetic sources so far (their elements are addressed by index); %s needs its element index (docs/jobs/deterministic-order.md, the plan)", src.kind)
		return src
	}
	batches := 0
	for i, op := range n.Ops {
		at := fmt.Sprintf("ops[%d].%s", i, op.Name())
		switch {
		case op.Map != nil:
			if op.Map.Deterministic != nil && !*op.Map.Deterministic {
				add(at+".deterministic", "order: deterministic needs deterministic maps (a parallel map that emits in completion order would reorder the window)")
			}
		case op.Batch != nil, op.PaddedBatch != nil:
			if batches++; batches > 1 {
				add(at, "order: deterministic takes one batching op")
			}
		case op.Prefetch != nil, op.Cost != nil:
		default:
			add(at, "not yet under order: deterministic: it changes how many elements a window yields (filter, take, skip, pack, bucketing), reorders them (shuffle: the window shuffle replaces it), repeats them (the job's epochs do), or caches them; docs/jobs/deterministic-order.md says which ops are wired")
		}
	}
	return orderedSource(n, src)
}

// orderedSource is src as windows: split w (Start w, End w+1) of epoch e
// is window w of e's layout, cut to consumer OrderConsumer of
// OrderConsumers' batches of it (order.Share; all of it for one
// consumer).
func orderedSource(n *Spec, src *compiledSource) *compiledSource {
	block, window, seed := uint64(n.OrderBlock), uint64(n.OrderWindow), n.Seed
	ci, cn := uint64(n.OrderConsumer), uint64(n.OrderConsumers)
	batch, drop := batchingOf(n)
	layout := func(epoch int64) (order.Share, error) {
		x, err := src.index()
		if err != nil {
			return order.Share{}, err
		}
		if x.N <= 0 {
			return order.Share{}, fmt.Errorf("order: deterministic: the source is empty")
		}
		l, err := order.NewLayout(uint64(x.N), block, window, seed, uint64(epoch))
		if err != nil {
			return order.Share{}, err
		}
		return order.ShareOf(l, ci, cn, batch, drop)
	}
	windows := func() (formats.IndexSplitter, error) {
		l, err := layout(0)
		if err != nil {
			return formats.IndexSplitter{}, err
		}
		return formats.IndexSplitter{N: int64(l.Windows()), Size: 1}, nil
	}
	return &compiledSource{
		kind:  src.kind + " (deterministic)",
		index: windows,
		splits: func() ([]formats.Split, error) {
			x, err := windows()
			if err != nil {
				return nil, err
			}
			out := make([]formats.Split, x.Len())
			for i := range out {
				out[i] = x.At(int64(i))
			}
			return out, nil
		},
		open: func(ctx context.Context, s formats.Split) (formats.Iterator, error) {
			l, err := layout(orderEpochOf(ctx))
			if err != nil {
				return nil, err
			}
			return openWindow(ctx, src, l, s)
		},
	}
}

// Deterministic reports whether the spec's order is deterministic.
func (s *Spec) Deterministic() bool {
	return strings.EqualFold(strings.TrimSpace(s.Order), OrderDeterministic)
}

type epochKey struct{}

// withEpoch tells a deterministic source's opener the job epoch it reads
// a split for (a window's content depends on it).
func withEpoch(ctx context.Context, epoch int64) context.Context {
	return context.WithValue(ctx, epochKey{}, epoch)
}

func orderEpochOf(ctx context.Context) int64 {
	e, _ := ctx.Value(epochKey{}).(int64)
	return e
}

// openWindow reads window s.ID's blocks (of the consumer's share) from
// src and yields the window's elements in position order.
func openWindow(ctx context.Context, src *compiledSource, l order.Share, s formats.Split) (formats.Iterator, error) {
	if s.ID < 0 || uint64(s.ID) >= l.Windows() || s.Start != s.ID || s.End != s.ID+1 {
		return nil, fmt.Errorf("order: split %d [%d, %d) is not a window of %d", s.ID, s.Start, s.End, l.Windows())
	}
	w := uint64(s.ID)
	ids, err := l.Window(w)
	if err != nil {
		return nil, err
	}
	reads := l.Reads(w)
	base := make(map[uint64]int, len(reads))
	elems := make([]tensor.Element, 0, len(ids))
	for _, r := range reads {
		base[r.Block] = len(elems)
		it, err := src.open(ctx, formats.Split{ID: int64(r.Block), Start: int64(r.First), End: int64(r.First + r.Len)})
		if err != nil {
			return nil, fmt.Errorf("window %d, block %d: %w", w, r.Block, err)
		}
		for range r.Len {
			el, err := it.Next(ctx)
			if err != nil {
				it.Close()
				if err == io.EOF {
					err = fmt.Errorf("the source ended before the block's %d elements", r.Len)
				}
				return nil, fmt.Errorf("window %d, block %d: %w", w, r.Block, err)
			}
			elems = append(elems, el)
		}
		it.Close()
	}
	return &windowIter{elems: elems, ids: ids, base: base, block: l.Block()}, nil
}

// windowIter yields a window's elements, read block by block, in the
// window's order.
type windowIter struct {
	elems []tensor.Element
	ids   []uint64
	base  map[uint64]int
	block uint64
	i     int
}

func (it *windowIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.i >= len(it.ids) {
		return tensor.Element{}, io.EOF
	}
	id := it.ids[it.i]
	it.i++
	j := it.base[id/it.block] + int(id%it.block)
	el := it.elems[j]
	it.elems[j] = tensor.Element{}
	return el, nil
}

func (it *windowIter) Close() error {
	it.elems = nil
	return nil
}

// OrderPlan is what a consumer of a deterministic spec needs to know its
// batch sequence without asking anyone: the layout's parameters and the
// batching.
type OrderPlan struct {
	Elements, Block, Window, Seed uint64
	// BatchSize is the batching op's size (1 without one: each element
	// is its own item); DropRemainder its drop_remainder.
	BatchSize     uint64
	DropRemainder bool
	// Consumer of Consumers: the share of the layout's windows this
	// job's sequence is (order.Share; Consumers 0: all of them).
	Consumer, Consumers uint64
}

// OrderOf is spec's order plan; false when its order is not
// deterministic. The spec must be valid.
func OrderOf(spec *Spec) (OrderPlan, bool, error) {
	c, err := compile(spec, nil)
	if err != nil {
		return OrderPlan{}, false, err
	}
	n := c.spec
	if n.Order != OrderDeterministic {
		return OrderPlan{}, false, nil
	}
	p := OrderPlan{Block: uint64(n.OrderBlock), Window: uint64(n.OrderWindow), Seed: n.Seed, BatchSize: 1,
		Consumer: uint64(n.OrderConsumer), Consumers: uint64(n.OrderConsumers)}
	var x formats.IndexSplitter
	switch {
	case n.Source.Range != nil:
		x, err = formats.RangeSplitter(rangeOptions(n.Source.Range))
	case n.Source.Synthetic != nil:
		x, err = formats.SyntheticSplitter(syntheticOptions(n.Source.Synthetic))
	}
	if err != nil {
		return OrderPlan{}, false, err
	}
	p.Elements = uint64(max(x.N, 0))
	p.BatchSize, p.DropRemainder = batchingOf(n)
	return p, true, nil
}

// Layout is epoch's layout, cut to the plan's consumer's share: its
// windows are the job's.
func (p OrderPlan) Layout(epoch int64) (order.Share, error) {
	l, err := order.NewLayout(p.Elements, p.Block, p.Window, p.Seed, uint64(epoch))
	if err != nil {
		return order.Share{}, err
	}
	return order.ShareOf(l, p.Consumer, p.Consumers, p.BatchSize, p.DropRemainder)
}

// batchingOf is n's batching op's size and drop_remainder (1, false
// without one).
func batchingOf(n *Spec) (uint64, bool) {
	for _, op := range n.Ops {
		switch {
		case op.Batch != nil:
			return uint64(op.Batch.Size), op.Batch.DropRemainder
		case op.PaddedBatch != nil:
			return uint64(op.PaddedBatch.Size), op.PaddedBatch.DropRemainder
		}
	}
	return 1, false
}

// WindowBatches is how many batches window w of share l yields.
func (p OrderPlan) WindowBatches(l order.Share, w uint64) uint64 {
	n := l.WindowLen(w)
	if p.DropRemainder {
		return n / p.BatchSize
	}
	return (n + p.BatchSize - 1) / p.BatchSize
}
