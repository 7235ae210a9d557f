package client

import (
	"testing"

	"github.com/feedmesh/feedmesh/transport/batch"
)

// Release puts a batch's buffer back once, however often it is called and
// on however many copies of the batch: a buffer in the pool twice would be
// handed to two batches at once.
func TestReleaseOnce(t *testing.T) {
	p := batch.NewBufferPool(64 << 20)
	buf := p.Get(1 << 20)
	b := Batch{buf: &recycled{rec: p.Recorder(), bufs: [][]byte{buf}}}
	c := b
	b.Release()
	b.Release()
	c.Release()
	if held, _ := p.Stats(); held != 1<<20 {
		t.Fatalf("pool holds %d bytes after releasing one 1 MiB batch three times, want %d", held, 1<<20)
	}
	Batch{}.Release() // a batch that is not recyclable: nothing happens
}
