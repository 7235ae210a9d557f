package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/order"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
)

// Deterministic order, the consumer's side (docs/jobs/deterministic-order.md).
// The workers lease windows first come, first served and produce each
// window's batches (a function of the spec, the seed, the epoch and the
// window alone: pipeline/order.go); batch k of window w names positions
// [k·size, …) of split w in its provenance. The consumer knows the
// sequence from the spec (pipeline.OrderOf): epoch by epoch, window by
// window, batch by batch. Batches that arrive before their turn wait in a
// reorder buffer of at most ReorderBatches; a batch that arrives twice (a
// dead worker's window produced again) is kept once.

// ErrReorderBound is wrapped by Next's error when the reorder buffer
// would hold more than JobOptions.ReorderBatches.
var ErrReorderBound = errors.New("reorder buffer over its bound")

// ReorderStats are a deterministic job's reorder buffer's.
type ReorderStats struct {
	// Held is how many batches it holds now, Peak the most it held,
	// Bound the most it may (JobOptions.ReorderBatches).
	Held  int `json:"held"`
	Peak  int `json:"peak"`
	Bound int `json:"bound"`
	// Duplicates counts batches that arrived again and were dropped.
	Duplicates int64 `json:"duplicates"`
	// Epoch, Window and Batch are the next batch the iterator returns:
	// batch Batch of window Window of epoch Epoch.
	Epoch  int64  `json:"epoch"`
	Window uint64 `json:"window"`
	Batch  uint64 `json:"batch"`
	// Step is the next batch's place in the run's sequence (numbered
	// without skips: what JobOptions.SkipBatches names); Skipped counts
	// the batches passed over.
	Step    uint64 `json:"step"`
	Skipped int64  `json:"skipped"`
	// AheadWindows is how far ahead of the next batch's window a stream's
	// batch may be before the stream waits (half of Bound's worth of
	// windows, one more for every Options.ReorderStall the next batch is
	// awaited); StreamWaits counts the waits, StallEscapes the batches let
	// through by that widening.
	AheadWindows uint64 `json:"ahead_windows"`
	StreamWaits  int64  `json:"stream_waits"`
	StallEscapes int64  `json:"stall_escapes"`
}

// okey is a batch's place in the sequence.
type okey struct {
	epoch int64
	w, k  uint64
}

func (a okey) less(b okey) bool {
	if a.epoch != b.epoch {
		return a.epoch < b.epoch
	}
	if a.w != b.w {
		return a.w < b.w
	}
	return a.k < b.k
}

// orderedRun is the reorder buffer and the cursor. Next's goroutine alone
// uses it, but for stats (under Iterator.mu).
type orderedRun struct {
	plan   pipeline.OrderPlan
	epochs int64 // the job's; -1: for ever
	bound  int

	cur    okey
	layout order.Share
	count  uint64 // batches of the cursor's window
	done   bool

	buf  map[okey]item
	peak int
	dups int64

	// g is the cursor's batch in the run's sequence (numbered without
	// skips); skips the ranges of it passed over (JobOptions.SkipBatches),
	// skipped how many were.
	g       uint64
	skips   order.Gaps
	skipRs  [][2]int64
	skipped int64

	// The gate (gateOrdered): a stream whose batch is soft windows or
	// more ahead of the cursor waits for it to move (moved is closed
	// and replaced when it does, at lastMove), or for stall without a
	// move. held counts the waits, escapes those that ended by stall.
	soft, nw      uint64
	stall         time.Duration
	moved         chan struct{}
	lastMove      time.Time
	held, escapes int64

	// The audit (audit.go): per epoch, the digest of what was returned;
	// ids are the element ids of window idsAt.
	digests map[int64]order.Digest
	ids     []uint64
	idsAt   okey
}

// newOrderedRun starts at the first batch the checkpoint from (nil: none)
// does not cover, passing over skips (sorted, disjoint ranges of the
// run's sequence).
func newOrderedRun(plan pipeline.OrderPlan, epochs int64, bound int, from *checkpoint, skips [][2]int64) (*orderedRun, error) {
	r, err := startOrderedRun(plan, epochs, bound, from)
	if err != nil || r.done {
		return r, err
	}
	var rs []order.Range
	for _, s := range skips {
		rs = append(rs, order.Range{Lo: uint64(s[0]), Hi: uint64(s[1])})
	}
	r.skips, r.skipRs = order.NewGaps(rs...), skips
	if r.g, err = r.globalOf(r.cur); err != nil {
		return nil, err
	}
	return r, r.settle()
}

// globalOf is k's place in the run's sequence, numbered without skips.
func (r *orderedRun) globalOf(k okey) (uint64, error) {
	var g uint64
	for e := range k.epoch + 1 {
		l, err := r.plan.Layout(e)
		if err != nil {
			return 0, err
		}
		last := l.Windows()
		if e == k.epoch {
			last = k.w
		}
		for w := range last {
			g += r.plan.WindowBatches(l, w)
		}
	}
	return g + k.k, nil
}

// settle moves the cursor past the skipped batches it is on, dropping
// any that arrived.
func (r *orderedRun) settle() error {
	for !r.done && r.skips.Contains(r.g) {
		if x, ok := r.buf[r.cur]; ok {
			delete(r.buf, r.cur)
			x.b.Release()
		}
		r.skipped++
		if err := r.step(); err != nil {
			return err
		}
	}
	return nil
}

// step moves the cursor to the next batch of the sequence.
func (r *orderedRun) step() error {
	next := r.cur
	next.k++
	r.g++
	return r.enter(next)
}

// startOrderedRun is newOrderedRun without the skips.
func startOrderedRun(plan pipeline.OrderPlan, epochs int64, bound int, from *checkpoint) (*orderedRun, error) {
	r := &orderedRun{plan: plan, epochs: epochs, bound: bound, buf: map[okey]item{}, digests: map[int64]order.Digest{},
		moved: make(chan struct{}), lastMove: time.Now()}
	perWindow := max((plan.Block*plan.Window+plan.BatchSize-1)/plan.BatchSize, 1)
	r.soft = max(uint64(bound)/2/perWindow, 1)
	l0, err := plan.Layout(0)
	if err != nil {
		return nil, err
	}
	r.nw, r.stall = l0.Windows(), DefaultReorderStall
	if from == nil {
		return r, r.enter(okey{})
	}
	if err := r.restore(from.Audit); err != nil {
		return nil, err
	}
	d := from.Delivered
	if err := r.enter(okey{epoch: d.DoneBefore}); err != nil || r.done {
		return r, err
	}
	returned := d.Returned[d.DoneBefore]
	for {
		n := r.layout.WindowLen(r.cur.w)
		s := returned[int64(r.cur.w)]
		covered := uint64(0)
		if len(s) >= 2 && s[0] == 0 {
			covered = uint64(s[1])
		}
		if covered < n {
			r.cur.k = covered / plan.BatchSize
			return r, r.enter(r.cur)
		}
		if err := r.enter(okey{epoch: r.cur.epoch, w: r.cur.w + 1}); err != nil || r.done || r.cur.epoch != d.DoneBefore {
			return r, err
		}
	}
}

// enter moves the cursor to k, or past it to the first batch there is.
func (r *orderedRun) enter(k okey) error {
	for {
		if r.epochs >= 0 && k.epoch >= r.epochs {
			r.cur, r.done = k, true
			return nil
		}
		if k.epoch != r.cur.epoch || r.layout.L.Len() == 0 {
			l, err := r.plan.Layout(k.epoch)
			if err != nil {
				return err
			}
			r.layout = l
		}
		if k.w >= r.layout.Windows() {
			k = okey{epoch: k.epoch + 1}
			r.cur.epoch = -1 // a new layout
			continue
		}
		r.cur = k
		r.count = r.plan.WindowBatches(r.layout, k.w)
		if k.k < r.count {
			return nil
		}
		k = okey{epoch: k.epoch, w: k.w + 1}
	}
}

// keyOf is where batch x belongs in the sequence.
func (r *orderedRun) keyOf(x item) (okey, error) {
	if len(x.prov) == 0 {
		return okey{}, fmt.Errorf("deterministic order: worker %s sent a batch without provenance", x.b.Worker)
	}
	p := x.prov[0]
	for _, q := range x.prov[1:] {
		if q.Epoch != p.Epoch || q.Split != p.Split {
			return okey{}, fmt.Errorf("deterministic order: worker %s sent a batch of two windows (epoch %d window %d, epoch %d window %d)", x.b.Worker, p.Epoch, p.Split, q.Epoch, q.Split)
		}
	}
	if p.Split < 0 || p.Lo < 0 || uint64(p.Lo)%r.plan.BatchSize != 0 {
		return okey{}, fmt.Errorf("deterministic order: worker %s sent a batch of window %d starting at position %d, not at a batch boundary (%d)", x.b.Worker, p.Split, p.Lo, r.plan.BatchSize)
	}
	return okey{epoch: p.Epoch, w: uint64(p.Split), k: uint64(p.Lo) / r.plan.BatchSize}, nil
}

// put files x; false: it is a duplicate (dropped).
func (r *orderedRun) put(x item) (bool, error) {
	k, err := r.keyOf(x)
	if err != nil {
		return false, err
	}
	if _, ok := r.buf[k]; ok || k.less(r.cur) || r.done {
		r.dups++
		return false, nil
	}
	if len(r.buf) >= r.bound {
		return false, fmt.Errorf("%w: it holds %d batches (JobOptions.ReorderBatches, feedmesh read --reorder-batches) while it waits for batch %d of window %d of epoch %d", ErrReorderBound, len(r.buf), r.cur.k, r.cur.w, r.cur.epoch)
	}
	r.buf[k] = x
	r.peak = max(r.peak, len(r.buf))
	return true, nil
}

// take returns the cursor's batch if it has arrived, and moves on.
func (r *orderedRun) take() (item, bool, error) {
	if r.done {
		return item{}, false, nil
	}
	x, ok := r.buf[r.cur]
	if !ok {
		return item{}, false, nil
	}
	delete(r.buf, r.cur)
	if err := r.audit(x); err != nil {
		return item{}, false, err
	}
	close(r.moved)
	r.moved, r.lastMove = make(chan struct{}), time.Now()
	if err := r.step(); err != nil {
		return item{}, false, err
	}
	return x, true, r.settle()
}

func (r *orderedRun) stats() *ReorderStats {
	return &ReorderStats{Held: len(r.buf), Peak: r.peak, Bound: r.bound, Duplicates: r.dups,
		Epoch: r.cur.epoch, Window: r.cur.w, Batch: r.cur.k, Step: r.g, Skipped: r.skipped,
		AheadWindows: r.soft, StreamWaits: r.held, StallEscapes: r.escapes}
}

// nextOrdered is Next for a deterministic job.
func (it *Iterator) nextOrdered(ctx context.Context, r *orderedRun) (Batch, error) {
	entered, queued := time.Now(), len(it.items)
	for {
		it.mu.Lock()
		x, ok, err := r.take()
		it.mu.Unlock()
		if err != nil {
			it.fail(err)
			return Batch{}, err
		}
		if ok {
			it.countDelivered(x, entered, queued)
			if it.track != nil {
				it.track.returned(x.prov)
			}
			return x.b, nil
		}
		select {
		case x, ok := <-it.items:
			if !ok {
				it.mu.Lock()
				err, done, at := it.err, r.done, r.cur
				it.mu.Unlock()
				if errors.Is(err, io.EOF) && !done {
					err = fmt.Errorf("deterministic order: the job ended before batch %d of window %d of epoch %d arrived", at.k, at.w, at.epoch)
				}
				return Batch{}, err
			}
			it.budget.Release(x.held)
			x.held = 0
			if x.cut != 0 {
				err := fmt.Errorf("deterministic order: worker %s sent an element cut after %d ops (deterministic jobs are not cut)", x.b.Worker, x.cut)
				it.fail(err)
				return Batch{}, err
			}
			it.mu.Lock()
			kept, err := r.put(x)
			it.mu.Unlock()
			if err != nil {
				it.fail(err)
				return Batch{}, err
			}
			if !kept {
				x.b.Release()
			}
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		}
	}
}

// withOrder is spec with the order and seed the consumer asked for
// (JobOptions.Order, Seed) written in; spec itself when it asked for
// neither.
func withOrder(spec *pipeline.Spec, c jobspec.Consumer) *pipeline.Spec {
	if c.Order() == "" && c.Seed() == 0 {
		return spec
	}
	s := *spec
	if c.Order() != "" {
		s.Order = c.Order()
	}
	if c.Seed() != 0 {
		s.Seed = c.Seed()
	}
	return &s
}

// orderedFor is the reorder buffer of a deterministic job of spec, nil
// for another; an error for what deterministic order does not serve yet.
func orderedFor(spec *pipeline.Spec, n jobspec.Normalized, from *checkpoint) (*orderedRun, error) {
	plan, ok, err := pipeline.OrderOf(spec)
	if err != nil || !ok {
		return nil, err
	}
	if cut := n.Job().OffloadBoundary(); cut > 0 {
		return nil, fmt.Errorf("%w: offload_boundary %d: deterministic order is not yet with a cut (the nodes would ship elements, not a window's batches)", ErrJobOptions, cut)
	}
	if k := n.Job().NumConsumers(); k > 1 {
		return nil, fmt.Errorf("%w: num_consumers %d: a deterministic job has one consumer; consumer i of N distributes a job of its own whose spec says order_consumer: i, order_consumers: N (it gets global batches g mod N == i: docs/jobs/deterministic-order.md)", ErrJobOptions, k)
	}
	skips := n.Consumer().SkipBatches()
	if len(skips) == 0 && from != nil {
		skips = from.Skips // a resume that names none keeps the checkpoint's
	}
	return newOrderedRun(plan, n.Job().Epochs(), n.Consumer().ReorderBatches(), from, skips)
}

// orderPos is a deterministic consumer's position in a checkpoint: the
// next batch of its sequence.
type orderPos struct {
	Epoch  int64  `cbor:"1,keyasint"`
	Window uint64 `cbor:"2,keyasint"`
	Batch  uint64 `cbor:"3,keyasint"`
	// Consumer of Consumers: the share of the order the job read
	// (Spec.OrderConsumer, OrderConsumers); 0 of 0 for the whole.
	Consumer  uint64 `cbor:"4,keyasint,omitempty"`
	Consumers uint64 `cbor:"5,keyasint,omitempty"`
}

// shareDiff says how a deterministic checkpoint's consumer share differs
// from spec's ("" when it does not, or for another kind of checkpoint):
// a resume may not change the consumer count or index (a re-cut on N',
// order.Merge, is not wired: docs/jobs/deterministic-order.md).
func shareDiff(c *checkpoint, spec *pipeline.Spec) string {
	if c.Position == nil {
		return ""
	}
	plan, ok, err := pipeline.OrderOf(spec)
	if err != nil || !ok {
		return ""
	}
	ci, cn := c.Position.Consumer, max(c.Position.Consumers, 1)
	pi, pn := plan.Consumer, max(plan.Consumers, 1)
	if ci == pi && cn == pn {
		return ""
	}
	return fmt.Sprintf("it is consumer %d of %d of a deterministic order, this spec's is consumer %d of %d: a resume keeps the consumer count (order_consumers %d, not %d) and index, since consumer i of N gets global batches g mod N == i; resume each consumer with its own checkpoint and the same order_consumers",
		ci, cn, pi, pn, cn, pn)
}

// expandPosition is what a consumer at position p returned, in the
// cluster's terms: every epoch before p's, and of p's epoch the windows
// before p's whole and p's batches before p's.
func expandPosition(spec *pipeline.Spec, p orderPos) (ranges.Delivered, error) {
	plan, ok, err := pipeline.OrderOf(spec)
	if err != nil {
		return ranges.Delivered{}, err
	}
	if !ok {
		return ranges.Delivered{}, fmt.Errorf("it is a deterministic job's (it has a position), and the spec's order is any")
	}
	return expandPlanPosition(plan, p)
}

// expandPlanPosition is expandPosition under the spec's order plan.
func expandPlanPosition(plan pipeline.OrderPlan, p orderPos) (ranges.Delivered, error) {
	d := ranges.Delivered{DoneBefore: p.Epoch}
	l, err := plan.Layout(p.Epoch)
	if err != nil {
		return d, err
	}
	if p.Window > l.Windows() || p.Window == l.Windows() && p.Batch > 0 {
		return d, fmt.Errorf("position: window %d of %d", p.Window, l.Windows())
	}
	for w := range p.Window {
		d.Return(p.Epoch, int64(w), 0, int64(l.WindowLen(w)))
	}
	if hi := min(p.Batch*plan.BatchSize, l.WindowLen(p.Window)); p.Batch > 0 {
		d.Return(p.Epoch, int64(p.Window), 0, int64(hi))
	}
	return d, nil
}
