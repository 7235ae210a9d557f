package diagnose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
)

// visionFolder writes an image folder of n noisy 500×375 JPEGs (q90) in
// two classes: what feedmesh-bench vision reads, small.
func visionFolder(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(39, 3))
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 500, 375))
		for y := range 375 {
			for x := range 500 {
				v := uint8(x/2 + y/3)
				img.Set(x, y, color.RGBA{v + uint8(r.IntN(40)), uint8(y) + uint8(r.IntN(40)), uint8(x) ^ v, 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		class := filepath.Join(dir, fmt.Sprintf("class%d", i%2))
		if err := os.MkdirAll(class, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(class, fmt.Sprintf("%03d.jpg", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// visionSpec is feedmesh-bench vision's training pipeline with the maps at
// par: decode_and_crop (ops[1]), random_flip, normalize (ops[3]), batch.
func visionSpec(dir string, par int, n int64) *pipeline.Spec {
	return pipeline.NewSpec(pipeline.FromFiles("image_folder", dir)).RepeatForever().
		Map("decode_and_crop", fn.Args{"height": 224, "width": 224, "channels": 3}, par).
		Map("random_flip", nil, 1).
		Map("normalize", fn.Args{"scale": 1.0 / 255, "mean": []any{0.485, 0.456, 0.406}, "std": []any{0.229, 0.224, 0.225}, "layout": "chw"}, par).
		Take(n).
		Batch(8, false)
}

// The vision pipeline as written (every map at parallelism 1): its
// statistics and diagnose name the decode the bounding op, and the
// recommendation gives it most of the cores.
func TestVisionDecodeBounds(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector instruments normalize's Go loops and not libjpeg-turbo's C decode: under -race normalize bounds the pipeline")
	}
	dir := visionFolder(t, 12)
	spec := visionSpec(dir, 1, 96)
	rep, err := pipeline.RunLocal(context.Background(), spec, pipeline.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BoundingOp != "map(decode_and_crop)" {
		t.Errorf("run-local names %q the bounding op, want map(decode_and_crop)", rep.BoundingOp)
	}
	it, err := pipeline.OpenWithOptions(context.Background(), spec, mustSplits(t, spec), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	drainAll(t, it)
	st := it.Stats()
	it.Close()
	d, err := Analyze(spec, Run{Ops: st.Ops, Seconds: time.Since(start).Seconds()}, Budget{Cores: 4})
	if err != nil {
		t.Fatal(err)
	}
	if d.BoundingOp != "map(decode_and_crop)" {
		t.Errorf("diagnose names %q the bounding op (%s), want map(decode_and_crop)", d.BoundingOp, d.Why)
	}
	dec, norm := d.Plan.Parallelism[1], max(d.Plan.Parallelism[3], 1)
	t.Logf("bounding %s (%s); recommended parallelism %v", d.BoundingOp, d.Why, d.Plan.Parallelism)
	if dec < 2 || dec <= norm {
		t.Errorf("diagnose recommends %d workers for decode_and_crop and %d for normalize of 4 cores (%v): want the decode to get the most", dec, norm, d.Plan.Parallelism)
	}
}

// With parallelism auto and the registered tuner, the decode gets the
// cores: its workers rise above normalize's.
func TestVisionAutotuneGivesDecodeTheCores(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector instruments normalize's Go loops and not libjpeg-turbo's C decode: under -race normalize bounds the pipeline")
	}
	dir := visionFolder(t, 12)
	spec := visionSpec(dir, pipeline.ParallelismAuto, 100000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	it, err := pipeline.OpenWithOptions(ctx, spec, mustSplits(t, spec), pipeline.Options{
		Cores: func() float64 { return 4 }, TuneInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var dec, norm, batches int
	for batches < 2000 {
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
		batches++
		ops := it.Stats().Ops
		dec, norm = ops[2].Parallelism, ops[4].Parallelism
		if dec >= 3 && dec > norm && batches >= 20 {
			break
		}
	}
	t.Logf("after %d batches: decode_and_crop at %d workers, normalize at %d", batches, dec, norm)
	if dec < 3 || dec <= norm {
		t.Errorf("after %d batches autotune runs decode_and_crop at %d workers and normalize at %d of a 4-core budget: want decode to have the most, at least 3", batches, dec, norm)
	}
}

func drainAll(t *testing.T, it pipeline.Iterator) {
	t.Helper()
	for {
		_, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustSplits(t *testing.T, spec *pipeline.Spec) []pipeline.Split {
	t.Helper()
	ss, err := pipeline.Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
