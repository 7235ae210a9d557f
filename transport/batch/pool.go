package batch

import (
	"math/bits"
	"sync"
)

// BufferPool recycles the buffers batch tails are read into
// (ReceiverConfig.Alloc = pool.Get), so a consumer that hands batches back
// (pool.Put of the buffer) does not make the runtime allocate, zero and later
// collect a new buffer per batch: at 1 MiB batches that was a quarter of the
// receiving process's time (docs/benchmarks/log.md).
//
// Buffers are kept in size classes, eight per doubling (a buffer is at most
// 1/8 larger than asked for), and the bytes kept are bounded by the pool's
// max; Put beyond it drops the buffer for the garbage collector. Buffers below
// minPooled bytes are not pooled. Safe for concurrent use.
type BufferPool struct {
	mu   sync.Mutex
	free map[int][][]byte // by class size (== cap of the buffers)
	held int64            // bytes in free
	max  int64

	reused int64 // Gets served from free
}

// minPooled is the smallest buffer worth pooling; smaller ones are cheap to
// allocate and would fragment the classes.
const minPooled = 4 << 10

// NewBufferPool returns a pool keeping at most maxBytes of free buffers.
func NewBufferPool(maxBytes int64) *BufferPool {
	return &BufferPool{free: map[int][][]byte{}, max: maxBytes}
}

// classSize rounds n up to its size class: in (2^(k-1), 2^k], multiples of
// 2^(k-4).
func classSize(n int) int {
	if n <= minPooled {
		return n
	}
	step := 1 << max(bits.Len(uint(n-1))-4, 0)
	return (n + step - 1) &^ (step - 1)
}

// Get returns a buffer of length n, recycled when one of its class is free.
func (p *BufferPool) Get(n int) []byte {
	c := classSize(n)
	if c == n && n <= minPooled {
		return make([]byte, n)
	}
	p.mu.Lock()
	if l := p.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[c] = l[:len(l)-1]
		p.held -= int64(c)
		p.reused++
		p.mu.Unlock()
		return b[:n]
	}
	p.mu.Unlock()
	return make([]byte, n, c)
}

// Put gives b back for reuse. The caller must not touch b (or anything
// sliced from it) afterwards. Buffers not of a class size (not from Get) and
// those beyond the pool's bound are dropped.
func (p *BufferPool) Put(b []byte) {
	c := cap(b)
	if c <= minPooled || classSize(c) != c {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+int64(c) > p.max {
		return
	}
	p.free[c] = append(p.free[c], b[:c])
	p.held += int64(c)
}

// Stats reports the bytes of free buffers the pool keeps and how many Gets
// it served with a recycled buffer.
func (p *BufferPool) Stats() (heldBytes, reused int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held, p.reused
}

// Recorder allocates one Receiver's batch buffers from a pool
// (ReceiverConfig.Alloc = r.Alloc) and remembers those of the batch being
// received, so that they can be given back (Put) once the batch is
// consumed. Like the Receiver it serves, it is for one goroutine.
type Recorder struct {
	pool *BufferPool
	bufs [][]byte
}

// Recorder returns a Recorder drawing from p.
func (p *BufferPool) Recorder() *Recorder { return &Recorder{pool: p} }

// Alloc is a ReceiverConfig.Alloc that records the buffers it hands out.
func (r *Recorder) Alloc(n int) []byte {
	b := r.pool.Get(n)
	r.bufs = append(r.bufs, b)
	return b
}

// Take returns the buffers recorded since the last Take (those of the
// batch just received, once Next has returned it) and forgets them.
func (r *Recorder) Take() [][]byte {
	b := r.bufs
	r.bufs = nil
	return b
}

// Put gives bufs back to the pool (see BufferPool.Put).
func (r *Recorder) Put(bufs [][]byte) {
	for _, b := range bufs {
		r.pool.Put(b)
	}
}
