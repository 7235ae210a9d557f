package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/pipeline/formats"
)

// Benchmarks: each iteration is one full pass over a fixed dataset; the
// elements/s metric is what the closing note reports.
//
//	go test -run XXX -bench . -benchtime 5x ./pipeline

const benchLines = 20000

// writeTextCorpus writes benchLines lines of synthetic text (heavy-tailed
// lengths) into 4 files under dir.
func writeTextCorpus(b *testing.B, dir string) string {
	b.Helper()
	o := formats.SyntheticOptions{Kind: "text", Count: benchLines, Seed: 1}
	splits, err := formats.SyntheticSplits(o)
	if err != nil {
		b.Fatal(err)
	}
	var bufs [4]bytes.Buffer
	n := 0
	for _, s := range splits {
		it, err := formats.OpenSynthetic(context.Background(), o, s)
		if err != nil {
			b.Fatal(err)
		}
		for {
			e, err := it.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			t, _ := e.Get("text")
			bufs[n%4].Write(t.Entry(0))
			bufs[n%4].WriteByte('\n')
			n++
		}
		it.Close()
	}
	for i := range bufs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part%d.txt", i)), bufs[i].Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return filepath.Join(dir, "*.txt")
}

func textSpec(glob string) *Spec {
	return NewSpec(FromFiles("lines", glob)).
		Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 1).
		Filter("length_between", fn.Args{"tensor": "tokens", "min": 1, "max": 512}).
		Shuffle(1024, 7).
		BucketBySequenceLength(BucketOp{Tensor: "tokens", Boundaries: []int64{32, 64, 128, 256}, BatchSizes: []int64{128, 64, 32, 16, 8}}).
		Prefetch(8)
}

// runPasses runs spec b.N times and reports rows per second.
func runPasses(b *testing.B, spec *Spec, o Options) {
	b.Helper()
	ctx := context.Background()
	splits, err := Splits(spec)
	if err != nil {
		b.Fatal(err)
	}
	var rows, bytesOut int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		it, err := OpenWithOptions(ctx, spec, splits, o)
		if err != nil {
			b.Fatal(err)
		}
		for {
			e, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			rows += e.Tensors[0].Shape[0]
			bytesOut += int64(e.ByteSize())
		}
		it.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "elements/s")
	b.SetBytes(bytesOut / int64(b.N))
}

func BenchmarkTextPipeline(b *testing.B) {
	glob := writeTextCorpus(b, b.TempDir())
	runPasses(b, textSpec(glob), Options{})
}

// BenchmarkStats compares the text pipeline with statistics on and off;
// the overhead is the ns/op ratio.
func BenchmarkStats(b *testing.B) {
	glob := writeTextCorpus(b, b.TempDir())
	b.Run("on", func(b *testing.B) { runPasses(b, textSpec(glob), Options{}) })
	b.Run("off", func(b *testing.B) { runPasses(b, textSpec(glob), Options{DisableStats: true}) })
}

// BenchmarkStatsCheapOps is the worst case for statistics: ops that do
// almost nothing per element, so the per-element clock reads dominate.
func BenchmarkStatsCheapOps(b *testing.B) {
	spec := NewSpec(Source{Range: &RangeSource{Stop: 100000, SplitSize: 10000}}).Take(1<<40).Skip(0).Batch(64, false)
	b.Run("on", func(b *testing.B) { runPasses(b, spec, Options{}) })
	b.Run("off", func(b *testing.B) { runPasses(b, spec, Options{DisableStats: true}) })
}

const benchImages = 256

func writeJPEGs(b *testing.B, dir string) string {
	b.Helper()
	for i := 0; i < benchImages; i++ {
		img := image.NewRGBA(image.Rect(0, 0, 320, 240))
		for y := 0; y < 240; y++ {
			for x := 0; x < 320; x++ {
				img.Set(x, y, color.RGBA{uint8(x + i), uint8(y * 2), uint8((x * y) >> 6), 255})
			}
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("img%03d.jpg", i)), buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return filepath.Join(dir, "*.jpg")
}

func imageSpec(glob string, parallelism int) *Spec {
	return NewSpec(FromFiles("whole_file", glob)).
		Map("decode_image", fn.Args{"tensor": "data", "output": "image"}, parallelism).
		Map("resize", fn.Args{"tensor": "image", "height": 144, "width": 144}, parallelism).
		Map("random_crop", fn.Args{"tensor": "image", "height": 128, "width": 128}, 1).
		Batch(32, false).
		Prefetch(2)
}

func BenchmarkImagePipeline(b *testing.B) {
	glob := writeJPEGs(b, b.TempDir())
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			runPasses(b, imageSpec(glob, par), Options{})
		})
	}
}

// BenchmarkMemoryBudget compares pipelines with and without a memory
// budget (membudget.go); the overhead is the ns/op ratio. The text
// pipeline shuffles, buckets and prefetches; the cheap one charges a
// shuffle, a batch and a prefetch for elements that cost nothing else.
func BenchmarkMemoryBudget(b *testing.B) {
	glob := writeTextCorpus(b, b.TempDir())
	cheap := NewSpec(Source{Range: &RangeSource{Stop: 100000, SplitSize: 10000}}).Shuffle(1024, 1).Batch(64, false).Prefetch(8)
	budget := func() *MemoryBudget { return NewMemoryBudget(1<<30, "") }
	b.Run("text/off", func(b *testing.B) { runPasses(b, textSpec(glob), Options{}) })
	b.Run("text/on", func(b *testing.B) { runPasses(b, textSpec(glob), Options{Budget: budget()}) })
	b.Run("cheap/off", func(b *testing.B) { runPasses(b, cheap, Options{}) })
	b.Run("cheap/on", func(b *testing.B) { runPasses(b, cheap, Options{Budget: budget()}) })
}
