package transportbench

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

var benchSizes = []int{64 << 10, 1 << 20, 16 << 20}

func rawBatch(size int) tensor.Element {
	return tensor.Element{Tensors: []tensor.Tensor{{Name: "data", DType: tensor.Uint8, Shape: []int64{int64(size)}, Data: randomBytes(size)}}}
}

// BenchmarkDecodeShipped decodes a raw batch frame the way the shipped client
// does (batch.Receiver without ReceiverConfig.Alloc: a new tail buffer per
// batch). transport/batch's BenchmarkEncodeDecode covers the pooled buffer;
// this one shows what the default costs: allocs/op stay flat across sizes
// (one tail buffer plus the header), B/op grows with the batch.
func BenchmarkDecodeShipped(b *testing.B) {
	cfg := transport.DefaultConfig()
	codec, err := transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			f, err := batch.Encode(codec, batch.Header{Worker: "w"}, rawBatch(size))
			if err != nil {
				b.Fatal(err)
			}
			var wire bytes.Buffer
			if _, err := f.WriteTo(&wire); err != nil {
				b.Fatal(err)
			}
			var rd bytes.Reader
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(wire.Bytes())
				if _, _, err := batch.Decode(codec, &rd, batch.Limits{}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReceiverShipped streams raw batches of 64 KiB, 1 MiB and 16 MiB
// through batch.Sender → batch.Receiver over loopback QUIC in one process,
// with the shipped settings (DefaultConfig, Window 4, no Alloc). allocs/op
// counts both sides per batch: quic-go allocates per packet, so it grows
// with the batch size — the per-packet overhead issue 7 is about.
func BenchmarkReceiverShipped(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) { benchReceiver(b, size) })
	}
}

func benchReceiver(b *testing.B, size int) {
	cfg := transport.DefaultConfig()
	codec, err := transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		b.Fatal(err)
	}
	srvTLS, cliTLS, err := selfSigned(transport.ALPN)
	if err != nil {
		b.Fatal(err)
	}
	newTransport := func(server bool) *transport.Transport {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s := srvTLS
		if !server {
			s = nil
		}
		tr, err := transport.New(pc, s, cliTLS, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close(); pc.Close() })
		return tr
	}
	worker, client := newTransport(true), newTransport(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rcv, err := batch.Open(ctx, client, codec, worker.Addr().String(), batch.OpenRequest{Job: "bench", Window: 4}, batch.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	defer rcv.Close()
	conn, err := worker.Listener(transport.KindData).Accept()
	if err != nil {
		b.Fatal(err)
	}
	snd, _, err := batch.Accept(ctx, codec, conn, senderMaxWindow)
	if err != nil {
		b.Fatal(err)
	}
	defer snd.Close()
	f, err := batch.Encode(codec, batch.Header{Worker: "w"}, rawBatch(size))
	if err != nil {
		b.Fatal(err)
	}
	n := b.N
	sent := make(chan error, 1)
	b.SetBytes(int64(size))
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
		b.Fatalf("end of stream: %v", err)
	}
	b.StopTimer()
	if err := <-sent; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSenderFreshFrame splits what a compress=<name> sender does per
// text batch beyond the default row's (which reuses pre-encoded frames):
// "encode" is the fresh batch.EncodeWith alone (unpadded, no tensor copy),
// "encode+lz4" and "encode+zstd" add Frame.Compressed. ns/op is per batch,
// MB/s counts the unpadded frame bytes compressed; wire-B/op is the mean
// frame after compression.
func BenchmarkSenderFreshFrame(b *testing.B) {
	els, err := TextBatches(context.Background(), 3000)
	if err != nil {
		b.Fatal(err)
	}
	codec, err := benchCodec()
	if err != nil {
		b.Fatal(err)
	}
	var unpadded int64
	srcs := make([]batchSource, len(els))
	for i, e := range els {
		srcs[i] = batchSource{el: e, hdr: batch.Header{Worker: "bench-sender", Seq: uint64(i)}, opt: batch.ShippedEncodeOptions}
		f, err := srcs[i].encode(codec)
		if err != nil {
			b.Fatal(err)
		}
		unpadded += f.Size()
	}
	for _, c := range []batch.Compression{batch.CompressNone, batch.CompressLZ4, batch.CompressZstd} {
		name := "encode"
		if c != batch.CompressNone {
			name += "+" + c.String()
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(unpadded / int64(len(srcs)))
			b.ReportAllocs()
			var wire int64
			k := 0
			for b.Loop() {
				f, err := srcs[k].encode(codec)
				if err == nil {
					f, err = f.Compressed(c)
				}
				if err != nil {
					b.Fatal(err)
				}
				wire += f.Size() + framePrefix
				k = (k + 1) % len(srcs)
			}
			b.ReportMetric(float64(wire)/float64(b.N), "wire-B/op")
		})
	}
}
