package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

// mapper applies one map function with the element's provenance.
type mapper struct {
	f    fn.MapFn
	seed uint64
	name string
}

func (m *mapper) apply(x item) (item, error) {
	fc := fn.FnContext{Seed: epochSeed(m.seed, x.epoch), SplitID: x.split, Index: x.index}
	out, err := callMap(m.f, &fc, x.el)
	if err != nil {
		return item{}, fmt.Errorf("%s: split %d element %d: %w", m.name, x.split, x.index, err)
	}
	x.el = out
	return x, nil
}

// epochSeed varies a random function's seed per repeat pass, so a repeated
// dataset is augmented differently each epoch (and identically on the
// first pass whether or not it is repeated).
func epochSeed(seed, epoch uint64) uint64 {
	if epoch == 0 {
		return seed
	}
	return mix64(seed ^ epoch)
}

// callMap runs a user function, turning a panic into an error: specs name
// functions from programs embedding feedmesh, and one bad element must not
// take a node down.
func callMap(f fn.MapFn, fc *fn.FnContext, e tensor.Element) (out tensor.Element, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("map function panicked: %v", r)
		}
	}()
	return f(fc, e)
}

func callFilter(f fn.FilterFn, fc *fn.FnContext, e tensor.Element) (keep bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("filter function panicked: %v", r)
		}
	}()
	return f(fc, e)
}

type mapIter struct {
	in iter
	m  *mapper
}

func (it *mapIter) next(ctx context.Context) (item, error) {
	x, err := it.in.next(ctx)
	if err != nil {
		return item{}, err
	}
	return it.m.apply(x)
}

func (it *mapIter) close() { it.in.close() }

type filterIter struct {
	in   iter
	f    fn.FilterFn
	seed uint64
	name string
}

func (it *filterIter) next(ctx context.Context) (item, error) {
	for {
		x, err := it.in.next(ctx)
		if err != nil {
			return item{}, err
		}
		fc := fn.FnContext{Seed: epochSeed(it.seed, x.epoch), SplitID: x.split, Index: x.index}
		keep, err := callFilter(it.f, &fc, x.el)
		if err != nil {
			return item{}, fmt.Errorf("%s: split %d element %d: %w", it.name, x.split, x.index, err)
		}
		if keep {
			return x, nil
		}
		dropItem(&x)
		if err := ctx.Err(); err != nil {
			return item{}, err
		}
	}
}

func (it *filterIter) close() { it.in.close() }

// shuffleIter is tf.data's shuffle: keep a buffer of up to size elements;
// each output is a uniformly random element of the buffer, replaced by the
// next input. The buffer spans split boundaries; the generator is seeded by
// (seed, epoch), so each repeat pass reshuffles differently but
// reproducibly.
type shuffleIter struct {
	in   iter
	size int
	buf  []item
	rng  *rand.Rand
	eof  bool
	acct *account // the elements in buf (nil: not counted)
}

func newShuffle(in iter, o *ShuffleOp, epoch uint64) *shuffleIter {
	return &shuffleIter{
		in:   in,
		size: int(o.Buffer),
		buf:  make([]item, 0, min(int(o.Buffer), 1024)),
		rng:  rand.New(rand.NewPCG(o.Seed, mix64(epoch^0x5851f42d4c957f2d))),
	}
}

func (it *shuffleIter) next(ctx context.Context) (item, error) {
	for !it.eof && len(it.buf) < it.size {
		x, err := it.in.next(ctx)
		if errors.Is(err, io.EOF) {
			it.eof = true
			break
		}
		if err != nil {
			return item{}, err
		}
		it.buf = append(it.buf, x)
		if err := it.acct.chargeItem(&x); err != nil {
			return item{}, err
		}
	}
	if len(it.buf) == 0 {
		return item{}, io.EOF
	}
	i := it.rng.IntN(len(it.buf))
	x := it.buf[i]
	last := len(it.buf) - 1
	it.buf[i] = it.buf[last]
	it.buf[last] = item{}
	it.buf = it.buf[:last]
	it.acct.creditItem(&x)
	return x, nil
}

func (it *shuffleIter) close() {
	it.in.close()
	it.acct.release()
}

// batchIter implements batch and padded_batch.
type batchIter struct {
	in       iter
	size     int64
	drop     bool
	pad      bool
	padValue float64
	name     string
	eof      bool
	items    []item
	elems    []tensor.Element
	acct     *account // the items of the batch being filled (nil: not counted)
	spares   *spares  // buffers handed back for this op's batches (nil: none)
	// splitLocal (order: deterministic) ends a batch where the split (a
	// window) ends: a batch never spans two windows, so each window's
	// batches are its own. held is the next window's first item.
	splitLocal bool
	held       *item
}

func (it *batchIter) next(ctx context.Context) (item, error) {
	for {
		if it.eof && it.held == nil {
			return item{}, io.EOF
		}
		full, err := it.fill(ctx)
		if err != nil {
			return item{}, err
		}
		if len(it.items) == 0 {
			return item{}, io.EOF
		}
		if it.drop && !full {
			for i := range it.items {
				dropItem(&it.items[i])
			}
			clear(it.items)
			it.acct.release()
			continue // a window's short batch; the next window may follow
		}
		out, err := assembleItemsInto(it.items, &it.elems, it.pad, it.padValue, nil, it.name, it.spares)
		it.acct.release()
		return out, err
	}
}

// fill collects the next batch's items; full: it has size of them.
func (it *batchIter) fill(ctx context.Context) (full bool, err error) {
	it.items = it.items[:0]
	for int64(len(it.items)) < it.size {
		var x item
		switch {
		case it.held != nil:
			x, it.held = *it.held, nil
		case it.eof:
			return false, nil
		default:
			x, err = it.in.next(ctx)
			if errors.Is(err, io.EOF) {
				it.eof = true
				return false, nil
			}
			if err != nil {
				return false, err
			}
		}
		if it.splitLocal && len(it.items) > 0 && (x.split != it.items[0].split || x.epoch != it.items[0].epoch) {
			it.held = &x
			return false, nil
		}
		it.items = append(it.items, x)
		if err := it.acct.chargeItem(&x); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (it *batchIter) close() {
	it.in.close()
	it.acct.release()
}

// assembleItems builds one batch; elems is scratch space reused between
// batches. For padded batches with no explicit length tensors, every tensor
// of rank >= 1 gets one.
func assembleItems(items []item, elems *[]tensor.Element, pad bool, padValue float64, lengths []string, name string) (item, error) {
	return assembleItemsInto(items, elems, pad, padValue, lengths, name, nil)
}

// assembleItemsInto is assembleItems with the buffers of a stacked batch
// from spares.
func assembleItemsInto(items []item, elems *[]tensor.Element, pad bool, padValue float64, lengths []string, name string, spares *spares) (item, error) {
	*elems = (*elems)[:0]
	for _, x := range items {
		*elems = append(*elems, x.el)
	}
	var (
		out tensor.Element
		err error
	)
	if pad {
		if lengths == nil {
			for _, t := range items[0].el.Tensors {
				if len(t.Shape) > 0 {
					lengths = append(lengths, t.Name)
				}
			}
		}
		out, err = bucketing.Pad(*elems, bucketing.PadOptions{PadValue: padValue, Lengths: lengths})
	} else {
		out, err = bucketing.StackInto(*elems, spares.alloc)
	}
	clear(*elems)
	if err != nil {
		return item{}, fmt.Errorf("%s: batch starting at split %d element %d: %w", name, items[0].split, items[0].index, err)
	}
	first := items[0]
	first.el = out
	first.prov = batchProv(items)
	return first, nil
}

// bucketIter is bucket_by_sequence_length.
type bucketIter struct {
	in      iter
	o       *BucketOp
	b       *bucketing.Bucketer[item]
	name    string
	eof     bool
	ready   []bucketing.Batch[item]
	elems   []tensor.Element
	lengths []string
	scratch []item
	acct    *account // the items waiting in buckets (nil: not counted)
}

func newBucketIter(in iter, o *BucketOp, name string) (*bucketIter, error) {
	b, err := bucketing.New[item](o.Boundaries, o.BatchSizes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &bucketIter{in: in, o: o, b: b, name: name, lengths: []string{o.Tensor}}, nil
}

func (it *bucketIter) next(ctx context.Context) (item, error) {
	for len(it.ready) == 0 {
		if it.eof {
			return item{}, io.EOF
		}
		x, err := it.in.next(ctx)
		if errors.Is(err, io.EOF) {
			it.eof = true
			if !it.o.DropRemainder {
				it.ready = it.b.Flush()
			} else if it.b.Pending() > 0 {
				for _, b := range it.b.Flush() {
					for i := range b.Items {
						dropItem(&b.Items[i])
					}
				}
				it.acct.release()
			}
			continue
		}
		if err != nil {
			return item{}, err
		}
		t, ok := x.el.Get(it.o.Tensor)
		if !ok {
			return item{}, fmt.Errorf("%s: split %d element %d has no tensor %q", it.name, x.split, x.index, it.o.Tensor)
		}
		if batch, full := it.b.Add(t.Len(), x); full {
			it.ready = append(it.ready, batch)
		}
		if err := it.acct.chargeItem(&x); err != nil {
			return item{}, err
		}
	}
	batch := it.ready[0]
	it.ready[0] = bucketing.Batch[item]{}
	it.ready = it.ready[1:]
	out, err := assembleItems(batch.Items, &it.elems, true, it.o.PadValue, it.lengths, it.name)
	if it.acct != nil {
		for i := range batch.Items {
			it.acct.creditItem(&batch.Items[i])
		}
	}
	return out, err
}

func (it *bucketIter) close() {
	it.in.close()
	it.acct.release()
}

// repeatIter re-opens its input count times (-1: forever). A pass that
// yields nothing ends the repetition, so an empty dataset repeated forever
// is empty instead of spinning.
type repeatIter struct {
	count  int64
	reopen func(pass int64) (iter, error)
	cur    iter
	pass   int64
	got    bool
	done   bool
}

func (it *repeatIter) next(ctx context.Context) (item, error) {
	for {
		if it.done {
			return item{}, io.EOF
		}
		if it.cur == nil {
			if it.count >= 0 && it.pass >= it.count {
				it.done = true
				continue
			}
			cur, err := it.reopen(it.pass)
			if err != nil {
				return item{}, err
			}
			it.cur, it.got = cur, false
		}
		x, err := it.cur.next(ctx)
		if err == nil {
			it.got = true
			return x, nil
		}
		if !errors.Is(err, io.EOF) {
			return item{}, err
		}
		it.cur.close()
		it.cur = nil
		it.pass++
		if !it.got {
			it.done = true
		}
	}
}

func (it *repeatIter) close() {
	if it.cur != nil {
		it.cur.close()
		it.cur = nil
	}
}

type takeIter struct {
	in    iter
	count int64
	n     int64
}

func (it *takeIter) next(ctx context.Context) (item, error) {
	if it.n >= it.count {
		return item{}, io.EOF
	}
	x, err := it.in.next(ctx)
	if err != nil {
		return item{}, err
	}
	it.n++
	return x, nil
}

func (it *takeIter) close() { it.in.close() }

type skipIter struct {
	in      iter
	count   int64
	skipped bool
}

func (it *skipIter) next(ctx context.Context) (item, error) {
	if !it.skipped {
		for i := int64(0); i < it.count; i++ {
			x, err := it.in.next(ctx)
			if err != nil {
				return item{}, err
			}
			dropItem(&x)
		}
		it.skipped = true
	}
	return it.in.next(ctx)
}

func (it *skipIter) close() { it.in.close() }

// costIter spends CPU or waits per element, standing in for expensive
// preprocessing.
type costIter struct {
	in    iter
	cpu   time.Duration
	sleep time.Duration
	sink  uint64
}

func (it *costIter) next(ctx context.Context) (item, error) {
	x, err := it.in.next(ctx)
	if err != nil {
		return item{}, err
	}
	if it.cpu > 0 {
		deadline := time.Now().Add(it.cpu)
		for time.Now().Before(deadline) {
			for i := 0; i < 256; i++ {
				it.sink = mix64(it.sink + uint64(i))
			}
		}
	}
	if it.sleep > 0 {
		t := time.NewTimer(it.sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return item{}, ctx.Err()
		}
	}
	return x, nil
}

func (it *costIter) close() { it.in.close() }
