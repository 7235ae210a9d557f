package fn

import (
	"bytes"
	"image/jpeg"
	"math/rand/v2"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

// TestResamplePassesMatchGo: the passes a build runs (C with cgo) give
// the bytes of resample_go.go's, on random images of 1 to 4 channels,
// windows inside wider rows, fractional boxes, up- and downscaling, every
// filter.
func TestResamplePassesMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 2))
	for i := range 300 {
		c := 1 + r.IntN(4)
		w, h := 1+r.IntN(90), 1+r.IntN(90)
		extra := r.IntN(3) // pixels after each row: a window inside a wider image
		stride := (w + extra) * c
		src := make([]byte, h*stride)
		for j := range src {
			src[j] = byte(r.IntN(256))
		}
		ow, oh := 1+r.IntN(120), 1+r.IntN(120)
		x0, y0 := r.Float64()*float64(w)/3, r.Float64()*float64(h)/3
		x1, y1 := x0+(float64(w)-x0)*(0.5+r.Float64()/2), y0+(float64(h)-y0)*(0.5+r.Float64()/2)
		f := interp(r.IntN(3))
		var k coeffs
		k.compute(w, x0, x1, ow, f)
		want := make([]byte, h*ow*c)
		got := make([]byte, h*ow*c)
		resampleHGo(want, ow*c, src, stride, 0, h, c, &k)
		resampleH(got, ow*c, src, stride, 0, h, c, &k)
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: horizontal pass, %d channels, %dx%d → %d wide, box [%g, %g), %v: bytes differ from the Go pass", i, c, w, h, ow, x0, x1, f)
		}
		var kv coeffs
		kv.compute(h, y0, y1, oh, f)
		wantV := make([]byte, oh*ow*c)
		gotV := make([]byte, oh*ow*c)
		resampleVGo(wantV, ow*c, want, ow*c, oh, &kv, make([]int32, ow*c))
		resampleV(gotV, ow*c, want, ow*c, oh, &kv, make([]int32, ow*c))
		if !bytes.Equal(gotV, wantV) {
			t.Fatalf("case %d: vertical pass, %d channels, %d high → %d, box [%g, %g), %v: bytes differ from the Go pass", i, c, h, oh, y0, y1, f)
		}
	}
}

// BenchmarkVisionTrain is feedmesh-bench vision's train ways per image on
// one core: decode_and_crop to 224 → random_flip → normalize (ImageNet
// mean and std, chw, float32) on photo-like 500×375 JPEGs at q90. Run it
// with -cpuprofile to see where an image's time goes.
func BenchmarkVisionTrain(b *testing.B) {
	var files [][]byte
	for i := range 8 {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photoLike(500, 375, uint64(i)), &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		files = append(files, buf.Bytes())
	}
	ops := []MapFn{
		mustMap(b, "decode_and_crop", Args{"height": 224, "width": 224, "channels": 3}),
		mustMap(b, "random_flip", nil),
		mustMap(b, "normalize", Args{"scale": 1.0 / 255, "mean": []any{0.485, 0.456, 0.406}, "std": []any{0.229, 0.224, 0.225}, "layout": "chw"}),
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e := tensor.Element{Tensors: []tensor.Tensor{tensor.BytesScalar("image", files[i%len(files)])}}
		for j, op := range ops {
			var err error
			if e, err = op(&FnContext{Seed: uint64(j), Index: int64(i)}, e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
