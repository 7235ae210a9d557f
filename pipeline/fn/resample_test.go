package fn

import (
	"bytes"
	"image/jpeg"
	"math/rand/v2"
	"strings"
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

// TestNormalizeRandomFlip: normalize with random_flip gives, for every
// element, either the normalized image or the normalized mirror (what
// random_flip then normalize give), both over the elements, the same for
// the same element, on every path (uint8 chw to float32 and 16-bit, hwc,
// one channel, float input).
func TestNormalizeRandomFlip(t *testing.T) {
	img := rawImage(5, 7, 3, func(y, x, k int) uint8 { return uint8(37*y + 11*x + 90*k) })
	gray := rawImage(4, 6, 1, func(y, x, _ int) uint8 { return uint8(40*y + 9*x) })
	vals := make([]float32, len(img.Data))
	for i, v := range img.Data {
		vals[i] = float32(v)
	}
	f32, _ := tensor.FromFloat32s("image", []int64{5, 7, 3}, vals)
	for _, c := range []struct {
		name string
		img  tensor.Tensor
		args Args
	}{
		{"chw float32", img, Args{"layout": "chw"}},
		{"chw bfloat16", img, Args{"layout": "chw", "dtype": "bfloat16"}},
		{"chw float16", img, Args{"layout": "chw", "dtype": "float16"}},
		{"hwc float32", img, Args{}},
		{"gray chw", gray, Args{"layout": "chw"}},
		{"float input", f32, Args{"layout": "chw"}},
	} {
		args := Args{"scale": 1.0 / 255, "mean": []any{0.485, 0.456, 0.406}, "std": []any{0.229, 0.224, 0.225}}
		if c.img.Shape[2] == 1 {
			args["mean"], args["std"] = []any{0.5}, []any{0.25}
		}
		for k, v := range c.args {
			args[k] = v
		}
		plain := mustMap(t, "normalize", args)
		args["random_flip"] = true
		fused := mustMap(t, "normalize", args)
		h, w, ch := int(c.img.Shape[0]), int(c.img.Shape[1]), int(c.img.Shape[2])
		mirrored := flip(&c.img, h, w, ch, true, false)
		want, _ := plain(&FnContext{}, elem(c.img))
		wantM, _ := plain(&FnContext{}, elem(mirrored))
		var flipped, kept int
		for i := range int64(40) {
			got, err := fused(&FnContext{Seed: 5, Index: i}, elem(c.img))
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			again, _ := fused(&FnContext{Seed: 5, Index: i}, elem(c.img))
			if !bytes.Equal(got.Tensors[0].Data, again.Tensors[0].Data) {
				t.Fatalf("%s: element %d differs between two calls", c.name, i)
			}
			switch {
			case bytes.Equal(got.Tensors[0].Data, wantM.Tensors[0].Data) && slicesEqual(got.Tensors[0].Shape, wantM.Tensors[0].Shape):
				flipped++
			case bytes.Equal(got.Tensors[0].Data, want.Tensors[0].Data) && slicesEqual(got.Tensors[0].Shape, want.Tensors[0].Shape):
				kept++
			default:
				t.Fatalf("%s: element %d is neither the normalized image nor its mirror", c.name, i)
			}
		}
		if flipped < 5 || kept < 5 {
			t.Errorf("%s: %d of 40 mirrored, %d kept", c.name, flipped, kept)
		}
	}
	if _, err := mustMap(t, "normalize", Args{"random_flip": true})(&FnContext{}, elem(tensor.Tensor{Name: "image", DType: tensor.Uint8, Shape: []int64{6}, Data: make([]byte, 6)})); err == nil || !strings.Contains(err.Error(), "not an image") {
		t.Errorf("random_flip of a vector: %v", err)
	}
}
