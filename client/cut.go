package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// A partial offload (JobOptions.OffloadBoundary, FastFlow's "which ops"):
// the nodes run the source and the ops before the cut and ship single
// elements, each naming the source element it was made from (Header.Prov,
// exactly-once); the iterator runs the rest of the pipeline over them
// (pipeline.OpenSuffix) between its buffer and Next. The suffix seeds its
// random ops from that provenance, so the batches hold what the whole
// pipeline run by the nodes would have made.
//
// What reaches the trainer: each batch Next returns names the source
// elements it was made of, and those are what a Checkpoint covers. An
// element the suffix dropped (a filter after the cut) counts as returned
// with the next batch; elements the suffix holds when the job stops (a
// batch being filled) are the "prefetched, not returned" of exactly-once:
// a resume delivers them again. The statistics count the trainer's
// batches; a worker's figures count the elements it shipped (Elements,
// CutElements), and its Batches only the batches it made whole.

// A job can also be cut while it runs (offload auto, from its first
// measurements: cutMidJob): the nodes' splits leased from then on come as
// single elements marked with the cut (api.CutHeader), while batches made
// by the whole pipeline (splits leased before, the local worker's) still
// arrive. The suffix takes the marked elements; the others pass through
// it unchanged (pullCut), so that Next returns both.

// cutRun is an iterator's suffix. It runs on a goroutine of its own (run),
// under a context of its own: Next's context only bounds Next's wait (a
// deadline that expires there must not end the suffix, whose pipeline
// keeps its first error).
type cutRun struct {
	cut     int
	it      pipeline.Iterator
	tr      pipeline.Tracker
	dr      pipeline.Dropper
	batched bool // the whole spec batches: Next's batches do
	out     chan cutOut
	// pending holds the one marked element a Next that was waiting on
	// the buffer when the job was cut took there (capacity 1).
	pending chan item
	cancel  context.CancelFunc
	done    chan struct{}

	final atomic.Pointer[error] // how the suffix ended (io.EOF at the end of data), set before done closes
	rows  atomic.Int64          // rows of the suffix's batches (not those passed through)
	seq   uint64                // the suffix's batches so far (Batch.Seq; run's goroutine only)

	mu   sync.Mutex // pulls run on the suffix's goroutines
	wire int64      // wire bytes of the elements pulled since the last batch
}

// cutOut is one batch of the suffix, or one that passed through it.
type cutOut struct {
	b    Batch
	prov []batch.ProvRange
	wire int64
}

// openCut starts the suffix of spec after cut ops; the iterator's Close
// stops it.
func (it *Iterator) openCut(spec *pipeline.Spec, cut int) error {
	// Not it.ctx: the end of data cancels that, and the suffix still has
	// the buffer to finish.
	ctx, cancel := context.WithCancel(context.Background())
	r := &cutRun{cut: cut, batched: spec.Batched(), out: make(chan cutOut, 1), pending: make(chan item, 1), cancel: cancel, done: make(chan struct{})}
	suf, err := pipeline.OpenSuffix(ctx, spec, cut, func(ctx context.Context) (pipeline.CutElement, error) { return it.pullCut(ctx, r) }, pipeline.Options{DisableStats: true})
	if err != nil {
		cancel()
		return err
	}
	r.it, r.tr, r.dr = suf, suf.(pipeline.Tracker), suf.(pipeline.Dropper)
	it.cut.Store(r)
	go func() {
		defer close(r.done)
		if err := r.run(ctx); err != nil {
			r.final.Store(&err)
			if !errors.Is(err, io.EOF) {
				it.fail(err) // the engine stops; nothing more is pulled
			}
		}
	}()
	return nil
}

// run pulls the suffix's batches into out until its end (io.EOF, or the
// iteration's error, returned) or ctx's (nil). The end is not sent on out:
// pullCut sends there too, from the suffix's goroutines, and nextCut
// returns the end once out is empty and done closed.
func (r *cutRun) run(ctx context.Context) error {
	for {
		el, err := r.it.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		o := cutOut{}
		o.b = Batch{Element: el, batched: r.batched}
		if rc, ok := r.it.(pipeline.Recycler); ok && r.batched {
			o.b.buf = &recycled{suffix: rc, el: el} // Release hands it back to the suffix
		}
		r.rows.Add(o.b.Rows())
		for _, s := range r.tr.LastProvenance() {
			o.prov = batch.AppendProv(o.prov, s.Epoch, s.Split, s.Indices)
		}
		for _, s := range r.dr.Dropped() {
			o.prov = batch.AppendProv(o.prov, s.Epoch, s.Split, s.Indices)
		}
		o.prov = sortProv(o.prov)
		if len(o.prov) > 0 {
			o.b.Epoch = o.prov[0].Epoch
		}
		// The batch is this client's: its elements came from
		// the nodes' streams (counted per worker as they ship).
		o.b.Worker, o.b.Seq = SuffixWorker, r.seq
		r.seq++
		r.mu.Lock()
		o.wire, r.wire = r.wire, 0
		r.mu.Unlock()
		select {
		case r.out <- o:
		case <-ctx.Done():
			return nil
		}
	}
}

// pullCut is the suffix's input: the next marked element from the buffer
// the engine fills, with its provenance. A batch the whole pipeline made
// passes through to Next meanwhile; a marked frame that is not one
// element, or of another cut, fails the iteration.
func (it *Iterator) pullCut(ctx context.Context, r *cutRun) (pipeline.CutElement, error) {
	for {
		var x item
		var ok bool
		select {
		case x = <-r.pending:
			ok = true
		case x, ok = <-it.items:
		case <-ctx.Done():
			return pipeline.CutElement{}, ctx.Err()
		}
		if !ok {
			it.mu.Lock()
			defer it.mu.Unlock()
			return pipeline.CutElement{}, it.err
		}
		it.budget.Release(x.held)
		if x.cut == 0 {
			it.countShipped(x)
			select {
			case r.out <- cutOut{b: x.b, prov: x.prov, wire: x.wire}:
				continue
			case <-ctx.Done():
				return pipeline.CutElement{}, ctx.Err()
			}
		}
		if x.cut != r.cut || len(x.prov) != 1 || x.prov[0].Hi-x.prov[0].Lo != 1 {
			err := fmt.Errorf("offload_boundary %d: worker %s sent a batch of %d source elements cut after %d ops, not one element cut after %d", r.cut, x.b.Worker, batch.Header{Prov: x.prov}.Elements(), x.cut, r.cut)
			it.fail(err)
			return pipeline.CutElement{}, err
		}
		it.countShipped(x)
		r.mu.Lock()
		r.wire += x.wire
		r.mu.Unlock()
		p := x.prov[0]
		return pipeline.CutElement{Element: x.b.Element, Epoch: p.Epoch, Split: p.Split, Index: p.Lo}, nil
	}
}

// nextCut is Next for a cut job: the suffix's next batch, or one that
// passed through it.
func (it *Iterator) nextCut(ctx context.Context, r *cutRun) (Batch, error) {
	entered, queued := time.Now(), len(it.items)
	var o cutOut
	select {
	case o = <-r.out:
	case <-r.done:
		select {
		case o = <-r.out:
		default:
			if err := r.final.Load(); err != nil {
				return Batch{}, *err // the end, for this call and every later one
			}
			it.mu.Lock() // stopped by Close
			defer it.mu.Unlock()
			return Batch{}, it.err
		}
	case <-ctx.Done():
		return Batch{}, ctx.Err()
	}
	it.countOut(o.b, int64(o.b.ByteSize()), o.wire, entered, queued)
	if it.track != nil {
		it.track.returned(o.prov)
	}
	return o.b, nil
}

// sortProv orders ranges by epoch, split and start and merges those that
// touch (a batch's elements come from several workers' streams, in any
// order).
func sortProv(p []batch.ProvRange) []batch.ProvRange {
	slices.SortFunc(p, func(a, b batch.ProvRange) int {
		return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Split, b.Split), cmp.Compare(a.Lo, b.Lo))
	})
	out := p[:0]
	for _, r := range p {
		if n := len(out); n > 0 && out[n-1].Epoch == r.Epoch && out[n-1].Split == r.Split && out[n-1].Hi >= r.Lo {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// closeCut stops the suffix (after the iteration's goroutines).
func (it *Iterator) closeCut() {
	if r := it.cut.Load(); r != nil {
		r.cancel()
		<-r.done
		r.it.Close()
	}
}
