package client

import (
	"context"
	"fmt"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// BenchmarkClientBuffer measures the client's buffer as the iterator uses it
// between a worker stream and Next: take the batch's bytes from the byte
// budget, queue it, dequeue it, give the bytes back. The batch is received
// elsewhere; what is measured is the buffer's own cost, which must not grow
// with the batch (allocs/op the same at every size).
func BenchmarkClientBuffer(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			el := tensor.Element{Tensors: []tensor.Tensor{{Name: "data", DType: tensor.Uint8, Shape: []int64{int64(size)}, Data: make([]byte, size)}}}
			budget := transport.NewByteBudget("PrefetchBytes", 256<<20)
			items := make(chan item, 16)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				n := int64(el.ByteSize())
				if err := budget.Acquire(ctx, n); err != nil {
					b.Fatal(err)
				}
				items <- item{b: Batch{Element: el, Worker: "w"}, size: n}
				x := <-items
				budget.Release(x.size)
			}
		})
	}
}
