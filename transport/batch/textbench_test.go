package batch

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// textBatches runs a real NLP input pipeline (heavy-tailed synthetic text →
// tokenize → bucket_by_sequence_length) and returns its batches without the
// raw text: what a trainer consumes (tokens padded per bucket, lengths, ids).
// bench/transportbench.TextBatches builds the same batches (same spec and
// seed) for `feedmesh-bench transport --workload text`; it is not called from
// here because this package must not import bench/ (an import cycle: the
// harness imports transport/batch). Keep the two specs in step.
func textBatches(tb testing.TB, n int64) []tensor.Element {
	spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: n, Seed: 3}))
	spec.Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 1)
	spec.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{32, 64, 128, 256, 512}, BatchSizes: []int64{64, 64, 32, 16, 8, 4}})
	ss, err := pipeline.Splits(spec)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	it, err := pipeline.Open(ctx, spec, ss)
	if err != nil {
		tb.Fatal(err)
	}
	defer it.Close()
	var out []tensor.Element
	for {
		el, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		var keep tensor.Element
		for _, t := range el.Tensors {
			if t.Name != "text" {
				keep.Tensors = append(keep.Tensors, t)
			}
		}
		out = append(out, keep)
	}
}

// BenchmarkTextStream streams real bucketed token batches worker → client
// over loopback QUIC, padded as produced (what tf.data service ships),
// unpadded (re-padded by the receiver), and unpadded and compressed, in the
// same run. The sender encodes (and compresses) every batch it sends anew,
// as a worker does.
func BenchmarkTextStream(b *testing.B) {
	batches := textBatches(b, 20000)
	for _, v := range []struct {
		name string
		o    EncodeOptions
		c    Compression
	}{{"padded", EncodeOptions{}, CompressNone}, {"unpadded", EncodeOptions{Unpadded: true}, CompressNone},
		{"unpadded+narrow", EncodeOptions{Unpadded: true, Narrow: true}, CompressNone},
		{"unpadded+lz4", EncodeOptions{Unpadded: true}, CompressLZ4}, {"unpadded+zstd", EncodeOptions{Unpadded: true}, CompressZstd}} {
		o := v.o
		b.Run(v.name, func(b *testing.B) {
			cfg := transport.DefaultConfig()
			p := newPair(b, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			rcv, err := Open(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Job: "bench", Window: 16, Compression: v.c}, DefaultLimits())
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
			var wire, padded int64
			for _, e := range batches {
				f, err := EncodeWith(p.worker.Codec, Header{Worker: "w1"}, e, o)
				if err != nil {
					b.Fatal(err)
				}
				if f, err = f.Compressed(v.c); err != nil {
					b.Fatal(err)
				}
				wire += f.Size()
				padded += int64(e.ByteSize())
			}
			n := b.N
			sent := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() {
				for i := range n {
					f, err := EncodeWith(p.worker.Codec, Header{Worker: "w1", Seq: uint64(i)}, batches[i%len(batches)], o)
					if err == nil {
						err = snd.Send(ctx, f)
					}
					if err != nil {
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
			el := time.Since(start)
			b.StopTimer()
			if err := <-sent; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n)/el.Seconds(), "batches/s")
			b.ReportMetric(float64(wire)/float64(len(batches)), "wire-bytes/batch")
			b.ReportMetric(float64(padded)/float64(len(batches)), "padded-bytes/batch")
		})
	}
}
