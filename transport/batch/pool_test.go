package batch

import (
	"sync"
	"testing"
)

func TestClassSize(t *testing.T) {
	for _, n := range []int{1, 100, minPooled, minPooled + 1, 5000, 65535, 65536, 65537, 1 << 20, 1<<20 + 1, 3 << 20, 16<<20 - 7, 256 << 20} {
		c := classSize(n)
		if c < n || (n > minPooled && c > n+n/8+1) || classSize(c) != c {
			t.Errorf("classSize(%d) = %d: want ≥ n, ≤ n·9/8, and a fixed point", n, c)
		}
	}
	if classSize(1<<20) != 1<<20 {
		t.Error("a power of two is its own class")
	}
}

func TestBufferPoolReuseAndBound(t *testing.T) {
	p := NewBufferPool(3 << 20)
	a := p.Get(1 << 20)
	if len(a) != 1<<20 {
		t.Fatalf("len %d", len(a))
	}
	p.Put(a)
	b := p.Get(1<<20 - 100) // same class
	if &b[0] != &a[0] || len(b) != 1<<20-100 {
		t.Fatal("a free buffer of the class was not reused")
	}
	if held, reused := p.Stats(); held != 0 || reused != 1 {
		t.Fatalf("stats %d held, %d reused; want 0, 1", held, reused)
	}
	var bufs [][]byte
	for range 5 {
		bufs = append(bufs, p.Get(1<<20))
	}
	for _, x := range bufs {
		p.Put(x)
	}
	if held, _ := p.Stats(); held != 3<<20 {
		t.Fatalf("holds %d bytes, want the bound %d", held, 3<<20)
	}
	p.Put(make([]byte, 1<<20+3)) // not a class size: not from Get
	p.Put(make([]byte, 100))     // too small to pool
	if held, _ := p.Stats(); held != 3<<20 {
		t.Fatalf("foreign buffers were kept: %d bytes held", held)
	}
	if s := p.Get(100); len(s) != 100 {
		t.Fatal("small Get")
	}
}

func TestBufferPoolConcurrent(t *testing.T) {
	p := NewBufferPool(8 << 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				b := p.Get(64<<10 + i*g)
				for j := range b {
					b[j] = byte(g)
				}
				for j := range b {
					if b[j] != byte(g) {
						t.Errorf("buffer shared between goroutines")
						return
					}
				}
				p.Put(b)
			}
		})
	}
	wg.Wait()
	if held, _ := p.Stats(); held > 8<<20 {
		t.Fatalf("holds %d bytes over its bound", held)
	}
}

func TestRecorderTakesWhatItAllocated(t *testing.T) {
	p := NewBufferPool(8 << 20)
	r := p.Recorder()
	a, b := r.Alloc(64<<10), r.Alloc(1<<20)
	got := r.Take()
	if len(got) != 2 || &got[0][0] != &a[0] || &got[1][0] != &b[0] {
		t.Fatalf("Take returned %d buffers, want the 2 allocated, in order", len(got))
	}
	if len(r.Take()) != 0 {
		t.Fatal("a second Take returned buffers again")
	}
	r.Put(got)
	if c := r.Alloc(1 << 20); &c[0] != &b[0] {
		t.Fatal("a buffer put back was not reused")
	}
}
