package pipeline

import "github.com/feedmesh/feedmesh/tensor"

// Recycling batches' buffers. A pipeline that ends in batch (prefetches
// after it aside) allocates a buffer per batch for each tensor, megabytes
// for images; freed to the garbage collector, such buffers are returned
// to the OS and fault their pages in again when the next batch reuses the
// memory (a profile of run-local's vision pipeline: 12 % of its CPU in
// page faults and clearing under the batch's allocation). A consumer done
// with a batch can hand it back (Recycler), and the batch op assembles a
// later batch into its buffers instead.

// Recycler is implemented by the iterators of Open and its variants.
type Recycler interface {
	// Recycle hands back a batch Next returned and the caller no longer
	// uses, nor anything that shares its tensors' buffers: they may back
	// a later batch. Batches of pipelines that do not end in batch, and
	// small tensors, are left to the garbage collector.
	Recycle(e Element)
}

const (
	// RecycleBuffers bounds the buffers a pipeline keeps for reuse, and
	// RecycleMaxBytes the size of each (so at most 2 × 64 MiB held);
	// RecycleMinBytes is the smallest worth keeping.
	RecycleBuffers  = 2
	RecycleMaxBytes = 64 << 20
	RecycleMinBytes = 1 << 20
)

// spares are the buffers handed back, for the pipeline's last batch op.
type spares struct{ ch chan []byte }

// newSpares returns the spares of a pipeline whose last op other than
// prefetch is batch (padded batches fill their buffers in parts), else
// nil.
func newSpares(ops []compiledOp) *spares {
	for i := len(ops) - 1; i >= 0; i-- {
		switch o := ops[i].op; {
		case o.Prefetch != nil:
			continue
		case o.Batch != nil:
			return &spares{ch: make(chan []byte, RecycleBuffers)}
		}
		return nil
	}
	return nil
}

// alloc returns an empty buffer of capacity n at least: a spare when one
// is large enough.
func (s *spares) alloc(n int) []byte {
	if s != nil && n >= RecycleMinBytes {
		select {
		case b := <-s.ch:
			if cap(b) >= n {
				return b[:0]
			}
		default:
		}
	}
	return make([]byte, 0, n)
}

func (s *spares) put(e tensor.Element) {
	if s == nil {
		return
	}
	for i := range e.Tensors {
		t := &e.Tensors[i]
		if t.DType == tensor.Bytes || cap(t.Data) < RecycleMinBytes || cap(t.Data) > RecycleMaxBytes {
			continue
		}
		select {
		case s.ch <- t.Data[:0]:
		default:
			return
		}
	}
}

// Recycle implements Recycler.
func (x *pipelineIter) Recycle(e Element) { x.p.spares.put(e) }
