package share

// ring is a FIFO of items with their sizes, growing by doubling and never
// shrinking except through reset. Slots are zeroed when items leave so the
// garbage collector can free what they referenced (encoded frames).
type ring[T any] struct {
	buf  []slot[T]
	head int // index of the oldest item in buf
	n    int // number of items
}

type slot[T any] struct {
	item T
	size int64
}

func (r *ring[T]) len() int { return r.n }

// at returns the i-th oldest item (0 = oldest); 0 <= i < len.
func (r *ring[T]) at(i int) T {
	return r.buf[(r.head+i)&(len(r.buf)-1)].item
}

func (r *ring[T]) push(item T, size int64) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = slot[T]{item: item, size: size}
	r.n++
}

// pop removes the oldest item and returns its size; len must be > 0.
func (r *ring[T]) pop() int64 {
	s := &r.buf[r.head]
	size := s.size
	*s = slot[T]{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return size
}

// grow doubles the buffer (its length stays a power of two), unrolling the
// items to the front.
func (r *ring[T]) grow() {
	c := 2 * len(r.buf)
	if c == 0 {
		c = 8
	}
	nb := make([]slot[T], c)
	for i := range r.n {
		nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}

// reset drops every item and the buffer itself.
func (r *ring[T]) reset() { *r = ring[T]{} }
