package batch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// benchBatch is a batch of about size bytes: a float32 tensor plus the small
// tensors a real batch carries (ids, a bytes tensor of labels).
func benchBatch(size int) tensor.Element {
	rows := 64
	return tensor.Element{Tensors: []tensor.Tensor{
		{Name: "features", DType: tensor.Float32, Shape: []int64{int64(rows), int64(size / 4 / rows)}, Data: make([]byte, size/4/rows*rows*4)},
		{Name: "id", DType: tensor.Int64, Shape: []int64{int64(rows)}, Data: make([]byte, 8*rows)},
		tensor.BytesVector("label", bytes.Fields(bytes.Repeat([]byte("cat dog "), rows/2))),
	}}
}

// BenchmarkEncodeDecode encodes a batch, writes it to memory and decodes it
// into a reused tail buffer. allocs/op stays flat across sizes: tensor bytes
// are never copied by the codec (the one copy is the in-memory "wire").
func BenchmarkEncodeDecode(b *testing.B) {
	codec := testCodec(b)
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			e := benchBatch(size)
			var wire bytes.Buffer
			var buf []byte
			alloc := func(n int) []byte {
				if cap(buf) < n {
					buf = make([]byte, n)
				}
				return buf[:n]
			}
			var rd bytes.Reader
			round := func(i int) {
				f, err := Encode(codec, Header{Seq: uint64(i), Worker: "w1", Prov: []ProvRange{{Epoch: 0, Split: 7, Lo: 0, Hi: 64}}}, e)
				if err != nil {
					b.Fatal(err)
				}
				wire.Reset()
				if _, err := f.WriteTo(&wire); err != nil {
					b.Fatal(err)
				}
				rd.Reset(wire.Bytes())
				if _, _, err := Decode(codec, &rd, Limits{}, alloc); err != nil {
					b.Fatal(err)
				}
			}
			round(0) // sizes the wire and tail buffers once
			b.SetBytes(int64(e.ByteSize()))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				round(i)
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkStream sends 1 MiB batches through Sender → Receiver over one
// loopback QUIC stream (TLS 1.3, DefaultConfig), with credit windows of 4 and
// 16 batches. pooled: the receiver reads every batch into one reused buffer
// (allowed by the credit rule: calling Next means the previous batch is done);
// alloc: a new buffer per batch.
func BenchmarkStream(b *testing.B) {
	for _, window := range []int{4, 16} {
		for _, pooled := range []bool{true, false} {
			name := fmt.Sprintf("window=%d/alloc", window)
			if pooled {
				name = fmt.Sprintf("window=%d/pooled", window)
			}
			b.Run(name, func(b *testing.B) { benchStream(b, 1<<20, window, pooled) })
		}
	}
}

func benchStream(b *testing.B, size, window int, pooled bool) {
	cfg := transport.DefaultConfig() // production timeouts: a loaded machine must not fail the run
	p := newPair(b, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rcfg ReceiverConfig
	if pooled {
		var buf []byte
		rcfg.Alloc = func(n int) []byte {
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			return buf[:n]
		}
	}
	rcv, err := OpenConfig(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Job: "bench", Window: window}, rcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rcv.Close()
	c, err := p.worker.T.Listener(transport.KindData).Accept()
	if err != nil {
		b.Fatal(err)
	}
	snd, _, err := Accept(ctx, p.worker.Codec, c, 64)
	if err != nil {
		b.Fatal(err)
	}
	defer snd.Close()
	f, err := Encode(p.worker.Codec, Header{Worker: "w1"}, benchBatch(size))
	if err != nil {
		b.Fatal(err)
	}
	n := b.N
	sent := make(chan error, 1)
	b.SetBytes(f.Size())
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range n {
			if err := snd.Send(ctx, f); err != nil {
				sent <- err
				return
			}
		}
		sent <- snd.End(nil)
	}()
	for range n {
		if _, _, err := rcv.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if _, _, err := rcv.Next(ctx); err != io.EOF {
		b.Fatalf("end: %v", err)
	}
	b.StopTimer()
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
}
