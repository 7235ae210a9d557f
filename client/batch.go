package client

import (
	"sync/atomic"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// SuffixWorker is the Worker of a batch the iterator's own part of a cut
// pipeline made (JobOptions.OffloadBoundary): the elements came from the
// nodes, the batch from this client.
const SuffixWorker = "suffix"

// Batch is one batch as delivered, with where it came from.
type Batch struct {
	tensor.Element
	// Worker is the node that produced the batch, or SuffixWorker for a
	// batch this client made of elements the nodes shipped (a job cut
	// by offload, JobOptions.OffloadBoundary).
	Worker string
	// Seq is the batch's sequence number within its worker's task (a
	// suffix's batches: within this iterator's suffix).
	Seq   uint64
	Epoch int64
	// Round (coordinated jobs) is the round the batch belongs to, its
	// bucket and every consumer's padded token count; nil otherwise.
	Round *api.RoundHeader

	batched bool
	buf     *recycled // the buffer the batch's tensors were read into; nil: not recyclable
}

// Rows is the number of elements in the batch: its leading dimension,
// taken from its first tensor, or 1 when the job's spec does not batch.
func (b *Batch) Rows() int64 {
	if b.Round != nil && b.Round.Filler && len(b.Tensors) == 0 {
		return 0
	}
	if !b.batched || len(b.Tensors) == 0 || len(b.Tensors[0].Shape) == 0 {
		return 1
	}
	return b.Tensors[0].Shape[0]
}

// recycled is a batch's receive buffers (its tail, or its re-padded
// tensors) on their way back to the client's pool, or a batch a cut job's
// suffix assembled on its way back to the suffix (pipeline.Recycler).
type recycled struct {
	rec  *batch.Recorder
	bufs [][]byte
	// suffix, when set, takes el back instead.
	suffix pipeline.Recycler
	el     tensor.Element
	done   atomic.Bool
}

// Release gives the batch's receive buffers back to the client for reuse by
// a later batch (Options.RecycleBytes; for a job cut by offload, the
// buffers the client assembled the batch in). After Release the batch's
// tensors must not be used: their bytes will be overwritten. Optional: a
// batch never released is garbage-collected as usual. Calling it again, or
// on a copy of the batch, does nothing.
func (b Batch) Release() {
	r := b.buf
	if r == nil || !r.done.CompareAndSwap(false, true) {
		return
	}
	if r.suffix != nil {
		r.suffix.Recycle(r.el)
		r.el = tensor.Element{}
		return
	}
	r.rec.Put(r.bufs)
	r.bufs = nil
}

// receiverConfig is the receive configuration of one of the client's batch
// streams, with rec (nil when the client does not recycle buffers) as its
// allocator. growWindow lets the window grow by Options.WindowBytes.
func (c *Client) receiverConfig(rec *batch.Recorder, growWindow bool) batch.ReceiverConfig {
	rc := batch.ReceiverConfig{Limits: batch.DefaultLimits()}
	if growWindow && c.opts.WindowBytes > 0 {
		rc.WindowBytes = c.opts.WindowBytes
	}
	if rec != nil {
		rc.Alloc = rec.Alloc
	}
	return rc
}

// recorder is a new Recorder of the client's pool, or nil without one.
func (c *Client) recorder() *batch.Recorder {
	if c.pool == nil {
		return nil
	}
	return c.pool.Recorder()
}

// recyclable wraps the buffers rec recorded for the batch just received,
// for Batch.Release.
func recyclable(rec *batch.Recorder) *recycled {
	if rec == nil {
		return nil
	}
	bufs := rec.Take()
	if len(bufs) == 0 {
		return nil
	}
	return &recycled{rec: rec, bufs: bufs}
}
