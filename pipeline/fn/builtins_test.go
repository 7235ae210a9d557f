package fn

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

func mustMap(t testing.TB, name string, args Args) MapFn {
	t.Helper()
	f, ok := LookupMap(name)
	if !ok {
		t.Fatalf("map %q not registered", name)
	}
	fn, err := f(args)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return fn
}

func elem(ts ...tensor.Tensor) tensor.Element { return tensor.Element{Tensors: ts} }

func text(s string) tensor.Element { return elem(tensor.BytesScalar("text", []byte(s))) }

func int32s(t *testing.T, e tensor.Element, name string) []int32 {
	t.Helper()
	tt, ok := e.Get(name)
	if !ok {
		t.Fatalf("no tensor %q in %+v", name, e)
	}
	v, err := tt.Int32s()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) == 0 {
		return []int32{}
	}
	return append([]int32(nil), v...)
}

func fnvMod(s string, m uint64) int32 { return int32(fnv1a([]byte(s)) % m) }

func TestTokenizeWhitespace(t *testing.T) {
	cases := []struct {
		in   string
		args Args
		want []int32
	}{
		{"", nil, []int32{}},
		{"   \t\n ", nil, []int32{}},
		{"hello", nil, []int32{fnvMod("hello", DefaultVocabSize)}},
		{" a  b\tc\r\nd ", Args{"vocab_size": 1000}, []int32{fnvMod("a", 1000), fnvMod("b", 1000), fnvMod("c", 1000), fnvMod("d", 1000)}},
		{"x\u00a0y\u3000z", Args{"vocab_size": 7}, []int32{fnvMod("x", 7), fnvMod("y", 7), fnvMod("z", 7)}}, // Unicode spaces
		{"same same", Args{"vocab_size": 1}, []int32{0, 0}},
	}
	for _, c := range cases {
		out, err := mustMap(t, "tokenize_whitespace", c.args)(&FnContext{}, text(c.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := int32s(t, out, "tokens"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.in, got, c.want)
		}
		if _, ok := out.Get("text"); !ok {
			t.Error("input tensor dropped")
		}
	}
	// Known FNV-1a value: fnv1a("a") = 0xaf63dc4c8601ec8c.
	if fnv1a([]byte("a")) != 0xaf63dc4c8601ec8c {
		t.Fatalf("fnv1a(a) = %#x", fnv1a([]byte("a")))
	}
	out, _ := mustMap(t, "tokenize_whitespace", Args{"tensor": "t", "output": "t", "vocab_size": 50})(&FnContext{}, elem(tensor.BytesScalar("t", []byte("a b"))))
	if len(out.Tensors) != 1 || out.Tensors[0].DType != tensor.Int32 {
		t.Fatalf("in-place output: %+v", out)
	}
}

func TestTokenizeBytes(t *testing.T) {
	out, err := mustMap(t, "tokenize_bytes", nil)(&FnContext{}, text("Az\xff"))
	if err != nil {
		t.Fatal(err)
	}
	if got := int32s(t, out, "tokens"); !reflect.DeepEqual(got, []int32{65, 122, 255}) {
		t.Fatalf("got %v", got)
	}
	out, _ = mustMap(t, "tokenize_bytes", Args{"vocab_size": 100, "output": "ids"})(&FnContext{}, text("Az\xff"))
	if got := int32s(t, out, "ids"); !reflect.DeepEqual(got, []int32{65, 22, 55}) {
		t.Fatalf("got %v", got)
	}
}

func TestLengthBetween(t *testing.T) {
	f, _ := LookupFilter("length_between")
	filter, err := f(Args{"tensor": "tokens", "min": 2, "max": 3})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]bool{0: false, 1: false, 2: true, 3: true, 4: false} {
		tok, _ := tensor.FromInt32s("tokens", nil, make([]int32, n))
		keep, err := filter(&FnContext{}, elem(tok))
		if err != nil || keep != want {
			t.Errorf("length %d: keep=%v err=%v, want %v", n, keep, err, want)
		}
	}
	byteLen, _ := f(Args{"tensor": "text", "max": 3})
	if keep, _ := byteLen(&FnContext{}, text("abcd")); keep {
		t.Error("bytes scalar of 4 bytes kept with max 3")
	}
	if _, err := byteLen(&FnContext{}, elem()); err == nil || !strings.Contains(err.Error(), `tensor "text" not found`) {
		t.Errorf("missing tensor: %v", err)
	}
}

func TestArgValidation(t *testing.T) {
	cases := []struct {
		fn   string
		args Args
		want string
	}{
		{"tokenize_whitespace", Args{"vocab": 5}, `tokenize_whitespace: unknown arg "vocab"`},
		{"tokenize_whitespace", Args{"vocab_size": 0}, "tokenize_whitespace: vocab_size: must be in [1,"},
		{"tokenize_whitespace", Args{"vocab_size": "big"}, "tokenize_whitespace: vocab_size: want an integer"},
		{"tokenize_whitespace", Args{"vocab_size": 1.5}, "tokenize_whitespace: vocab_size: want an integer"},
		{"tokenize_bytes", Args{"tensor": ""}, "tokenize_bytes: tensor: must not be empty"},
		{"decode_image", Args{"channels": 2}, "decode_image: channels: must be 0"},
		{"resize", Args{"height": 10}, "resize: width: required"},
		{"resize", Args{"height": -1, "width": 5}, "resize: height: must be in [1,"},
		{"random_crop", Args{"width": 5}, "random_crop: height: required"},
		{"random_flip", Args{"horizontal": "yes"}, "random_flip: horizontal: want true or false"},
		{"normalize", Args{"std": []any{1, 0}}, "normalize: std[1]: must not be 0"},
		{"normalize", Args{"mean": []any{1, 2}, "std": []any{1, 2, 3}}, "normalize: std: has 3 entries but mean has 2"},
		{"normalize", Args{"mean": []any{"a"}}, "normalize: mean[0]: want a number"},
		{"cast", Args{"tensor": "x"}, "cast: dtype: required"},
		{"cast", Args{"dtype": "int32"}, "cast: tensor: required"},
		{"cast", Args{"tensor": "x", "dtype": "int33"}, "cast: dtype: unknown dtype"},
		{"cast", Args{"tensor": "x", "dtype": "bytes"}, "cast: dtype: cannot cast to bytes"},
		{"json_field", Args{}, "json_field: field: required"},
		{"json_field", Args{"field": "a..b"}, "json_field: field: \"a..b\" has an empty path segment"},
		{"json_field", Args{"field": "a", "dtype": "complex"}, "json_field: dtype: unknown dtype"},
	}
	for _, c := range cases {
		f, ok := LookupMap(c.fn)
		if !ok {
			t.Fatalf("%s not registered", c.fn)
		}
		if _, err := f(c.args); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s(%v): got %v, want prefix %q", c.fn, c.args, err, c.want)
		}
	}
	lf, _ := LookupFilter("length_between")
	for args, want := range map[string]Args{
		"length_between: max: must be >= min": {"min": 5, "max": 2},
		"length_between: min: must be >= 0":   {"min": -1},
		`length_between: unknown arg "low"`:   {"low": 1},
	} {
		if _, err := lf(want); err == nil || !strings.HasPrefix(err.Error(), args) {
			t.Errorf("length_between(%v): got %v, want %q", want, err, args)
		}
	}
	for _, name := range []string{"tokenize_whitespace", "tokenize_bytes", "decode_image", "resize", "random_crop", "random_flip", "normalize", "cast", "json_field"} {
		if !contains(MapNames(), name) {
			t.Errorf("%s missing from MapNames()", name)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// testImage is a small picture with distinct pixels.
func testImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(40 * x), uint8(50 * y), uint8(10*x + 20*y), 255})
		}
	}
	return img
}

func TestDecodeImagePNG(t *testing.T) {
	src := testImage(5, 4)
	var buf bytes.Buffer
	if err := png.Encode(&buf, src); err != nil {
		t.Fatal(err)
	}
	out, err := mustMap(t, "decode_image", nil)(&FnContext{}, elem(tensor.BytesScalar("image", buf.Bytes()), tensor.ScalarInt64("label", 3)))
	if err != nil {
		t.Fatal(err)
	}
	img, _ := out.Get("image")
	if img.DType != tensor.Uint8 || !reflect.DeepEqual(img.Shape, []int64{4, 5, 3}) {
		t.Fatalf("decoded %s%v", img.DType, img.Shape)
	}
	for y := 0; y < 4; y++ {
		for x := 0; x < 5; x++ {
			i := (y*5 + x) * 3
			want := src.RGBAAt(x, y)
			if img.Data[i] != want.R || img.Data[i+1] != want.G || img.Data[i+2] != want.B {
				t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, img.Data[i:i+3], want)
			}
		}
	}
	// Gray PNG gives one channel; channels: 3 forces RGB.
	gray := image.NewGray(image.Rect(0, 0, 2, 2))
	gray.Pix = []uint8{0, 100, 200, 255}
	buf.Reset()
	png.Encode(&buf, gray)
	out, _ = mustMap(t, "decode_image", Args{"output": "pixels"})(&FnContext{}, elem(tensor.BytesScalar("image", buf.Bytes())))
	px, _ := out.Get("pixels")
	if !reflect.DeepEqual(px.Shape, []int64{2, 2, 1}) || !bytes.Equal(px.Data, gray.Pix) {
		t.Fatalf("gray: %v %v", px.Shape, px.Data)
	}
	out, _ = mustMap(t, "decode_image", Args{"channels": 3})(&FnContext{}, elem(tensor.BytesScalar("image", buf.Bytes())))
	px, _ = out.Get("image")
	if !reflect.DeepEqual(px.Shape, []int64{2, 2, 3}) || !bytes.Equal(px.Data[3:6], []byte{100, 100, 100}) {
		t.Fatalf("gray as rgb: %v %v", px.Shape, px.Data)
	}
}

func TestDecodeImageJPEG(t *testing.T) {
	// A flat colour survives JPEG almost exactly.
	src := image.NewRGBA(image.Rect(0, 0, 16, 8))
	for i := 0; i < len(src.Pix); i += 4 {
		src.Pix[i], src.Pix[i+1], src.Pix[i+2], src.Pix[i+3] = 200, 100, 50, 255
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	out, err := mustMap(t, "decode_image", nil)(&FnContext{}, elem(tensor.BytesScalar("image", buf.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	img, _ := out.Get("image")
	if !reflect.DeepEqual(img.Shape, []int64{8, 16, 3}) {
		t.Fatalf("shape %v", img.Shape)
	}
	for i, v := range img.Data {
		want := []int{200, 100, 50}[i%3]
		if d := int(v) - want; d < -4 || d > 4 {
			t.Fatalf("value %d = %d, want about %d", i, v, want)
		}
	}
	// Garbage and oversize images are errors, not panics.
	if _, err := mustMap(t, "decode_image", nil)(&FnContext{}, elem(tensor.BytesScalar("image", []byte("not an image")))); err == nil {
		t.Fatal("garbage decoded")
	}
	if _, err := mustMap(t, "decode_image", Args{"max_pixels": 100})(&FnContext{}, elem(tensor.BytesScalar("image", buf.Bytes()))); err == nil || !strings.Contains(err.Error(), "max_pixels") {
		t.Fatalf("oversize: %v", err)
	}
}

func rawImage(h, w, c int, f func(y, x, k int) uint8) tensor.Tensor {
	data := make([]byte, h*w*c)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for k := 0; k < c; k++ {
				data[(y*w+x)*c+k] = f(y, x, k)
			}
		}
	}
	return tensor.Tensor{Name: "image", DType: tensor.Uint8, Shape: []int64{int64(h), int64(w), int64(c)}, Data: data}
}

func TestResize(t *testing.T) {
	for _, c := range []int{1, 3, 4} {
		// A constant image stays constant at any size.
		img := rawImage(6, 9, c, func(_, _, k int) uint8 { return []uint8{10, 120, 240, 255}[k] })
		out, err := mustMap(t, "resize", Args{"height": 3, "width": 5})(&FnContext{}, elem(img))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := out.Get("image")
		if !reflect.DeepEqual(got.Shape, []int64{3, 5, int64(c)}) {
			t.Fatalf("c=%d: shape %v", c, got.Shape)
		}
		for i, v := range got.Data {
			if want := []uint8{10, 120, 240, 255}[i%c]; v != want {
				t.Fatalf("c=%d: value %d = %d, want %d", c, i, v, want)
			}
		}
	}
	// Upscaling a two-pixel gradient interpolates between its ends.
	img := rawImage(1, 2, 1, func(_, x, _ int) uint8 { return uint8(200 * x) })
	out, _ := mustMap(t, "resize", Args{"height": 1, "width": 8})(&FnContext{}, elem(img))
	got, _ := out.Get("image")
	for i := 1; i < len(got.Data); i++ {
		if got.Data[i] < got.Data[i-1] {
			t.Fatalf("not monotonic: %v", got.Data)
		}
	}
	if got.Data[0] > 20 || got.Data[7] < 180 || got.Data[3] < 60 || got.Data[3] > 140 {
		t.Fatalf("not bilinear: %v", got.Data)
	}
	f32, _ := tensor.FromFloat32s("image", []int64{1, 1, 1}, []float32{1})
	if _, err := mustMap(t, "resize", Args{"height": 1, "width": 1})(&FnContext{}, elem(f32)); err == nil || !strings.Contains(err.Error(), "want uint8") {
		t.Fatalf("float image: %v", err)
	}
}

func TestRandomCropAndFlipReproducible(t *testing.T) {
	img := rawImage(10, 12, 3, func(y, x, k int) uint8 { return uint8(y*12 + x + k*100) })
	crop := mustMap(t, "random_crop", Args{"height": 4, "width": 5})
	flip := mustMap(t, "random_flip", Args{"vertical": true})
	seen := map[string]bool{}
	for i := int64(0); i < 40; i++ {
		ctx := &FnContext{Seed: 7, SplitID: 2, Index: i}
		a, err := crop(ctx, elem(img))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := crop(&FnContext{Seed: 7, SplitID: 2, Index: i}, elem(img))
		if !reflect.DeepEqual(a, b) {
			t.Fatal("random_crop not reproducible for the same (seed, split, index)")
		}
		got, _ := a.Get("image")
		if !reflect.DeepEqual(got.Shape, []int64{4, 5, 3}) {
			t.Fatalf("shape %v", got.Shape)
		}
		// The crop is a contiguous window: check against its top-left pixel.
		y0, x0 := int(got.Data[0])/12, int(got.Data[0])%12
		for y := 0; y < 4; y++ {
			for x := 0; x < 5; x++ {
				if want := uint8((y0+y)*12 + x0 + x); got.Data[(y*5+x)*3] != want {
					t.Fatalf("crop at (%d,%d) wrong at (%d,%d)", y0, x0, y, x)
				}
			}
		}
		seen[string(got.Data[:1])] = true
		f1, _ := flip(ctx, elem(img))
		f2, _ := flip(&FnContext{Seed: 7, SplitID: 2, Index: i}, elem(img))
		if !reflect.DeepEqual(f1, f2) {
			t.Fatal("random_flip not reproducible")
		}
		seen["flip"+string(f1.Tensors[0].Data[:1])] = true
	}
	if len(seen) < 10 {
		t.Fatalf("crops/flips are not random: %d distinct", len(seen))
	}
	// Flip tables: horizontal and vertical of a 2x3 one-channel image.
	small := rawImage(2, 3, 1, func(y, x, _ int) uint8 { return uint8(10*y + x) })
	if got := flip2(&small, true, false); !bytes.Equal(got, []byte{2, 1, 0, 12, 11, 10}) {
		t.Fatalf("horizontal %v", got)
	}
	if got := flip2(&small, false, true); !bytes.Equal(got, []byte{10, 11, 12, 0, 1, 2}) {
		t.Fatalf("vertical %v", got)
	}
	if _, err := crop(&FnContext{}, elem(rawImage(3, 30, 1, func(_, _, _ int) uint8 { return 0 }))); err == nil || !strings.Contains(err.Error(), "smaller than the crop") {
		t.Fatalf("small image: %v", err)
	}
}

func flip2(t *tensor.Tensor, h, v bool) []byte {
	return flip(t, int(t.Shape[0]), int(t.Shape[1]), int(t.Shape[2]), h, v).Data
}

func TestNormalize(t *testing.T) {
	img := rawImage(1, 2, 3, func(_, x, k int) uint8 { return uint8(100*x + k) })
	out, err := mustMap(t, "normalize", Args{"mean": []any{1.0, 2, 3}, "std": []any{2, 4, 0.5}})(&FnContext{}, elem(img))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := out.Get("image")
	vals, _ := got.Float32s()
	want := []float32{(0 - 1) / 2.0, (1 - 2) / 4.0, (2 - 3) / 0.5, (100 - 1) / 2.0, (101 - 2) / 4.0, (102 - 3) / 0.5}
	if got.DType != tensor.Float32 || !reflect.DeepEqual(got.Shape, img.Shape) || !reflect.DeepEqual(vals, want) {
		t.Fatalf("got %s%v %v, want %v", got.DType, got.Shape, vals, want)
	}
	out, _ = mustMap(t, "normalize", Args{"scale": 1.0 / 255})(&FnContext{}, elem(rawImage(1, 1, 1, func(_, _, _ int) uint8 { return 255 })))
	if v, _ := out.Tensors[0].Float32s(); v[0] != 1 {
		t.Fatalf("scale: %v", v)
	}
	if _, err := mustMap(t, "normalize", Args{"mean": []any{1, 2}})(&FnContext{}, elem(img)); err == nil || !strings.Contains(err.Error(), "3 channels") {
		t.Fatalf("channel mismatch: %v", err)
	}
}

func TestCast(t *testing.T) {
	f, _ := tensor.FromFloat32s("x", nil, []float32{-1.7, 0, 2.5, 300})
	out, err := mustMap(t, "cast", Args{"tensor": "x", "dtype": "int32"})(&FnContext{}, elem(f))
	if err != nil {
		t.Fatal(err)
	}
	if got := int32s(t, out, "x"); !reflect.DeepEqual(got, []int32{-1, 0, 2, 300}) {
		t.Fatalf("float32->int32 %v", got)
	}
	out, _ = mustMap(t, "cast", Args{"tensor": "x", "dtype": "uint8"})(&FnContext{}, elem(f))
	if got := out.Tensors[0].Data; !bytes.Equal(got, []byte{0, 0, 2, 255}) {
		t.Fatalf("float32->uint8 saturating %v", got)
	}
	out, _ = mustMap(t, "cast", Args{"tensor": "x", "dtype": "bfloat16"})(&FnContext{}, elem(f))
	if v := tensor.BFloat16ToFloat32(binary.LittleEndian.Uint16(out.Tensors[0].Data[4:])); v != 2.5 {
		t.Fatalf("bfloat16 %v", v)
	}
	if _, err := mustMap(t, "cast", Args{"tensor": "text", "dtype": "int32"})(&FnContext{}, text("1")); err == nil {
		t.Fatal("cast of bytes succeeded")
	}
}

func TestJSONField(t *testing.T) {
	doc := elem(tensor.BytesScalar("json", []byte(`{"text": "hi", "meta": {"lang": "en", "score": 0.25, "ids": [4, 5]}}`)))
	cases := []struct {
		args  Args
		name  string
		dtype tensor.DType
		check func(tensor.Tensor) bool
	}{
		{Args{"field": "text"}, "text", tensor.Bytes, func(t tensor.Tensor) bool { return string(t.Entry(0)) == "hi" }},
		{Args{"field": "meta.lang", "output": "l"}, "l", tensor.Bytes, func(t tensor.Tensor) bool { return string(t.Entry(0)) == "en" }},
		{Args{"field": "meta.score", "dtype": "float64"}, "score", tensor.Float64, func(t tensor.Tensor) bool { v, _ := t.Float64s(); return v[0] == 0.25 }},
		{Args{"field": "meta.ids", "dtype": "int64"}, "ids", tensor.Int64, func(t tensor.Tensor) bool { v, _ := t.Int64s(); return reflect.DeepEqual(v, []int64{4, 5}) }},
		{Args{"field": "meta"}, "meta", tensor.Bytes, func(t tensor.Tensor) bool { return strings.HasPrefix(string(t.Entry(0)), `{"lang"`) }},
	}
	for _, c := range cases {
		out, err := mustMap(t, "json_field", c.args)(&FnContext{}, doc)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got, ok := out.Get(c.name)
		if !ok || got.DType != c.dtype || !c.check(*got) {
			t.Fatalf("%v: got %+v", c.args, got)
		}
	}
	for args, want := range map[string]string{
		"meta.missing": `json_field: field "meta.missing" missing`,
		"text.x":       `json_field: text: not an object`,
	} {
		if _, err := mustMap(t, "json_field", Args{"field": args})(&FnContext{}, doc); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
	if _, err := mustMap(t, "json_field", Args{"field": "meta.lang", "dtype": "int32"})(&FnContext{}, doc); err == nil {
		t.Error("string as int32 accepted")
	}
}

func BenchmarkTokenizeWhitespace(b *testing.B) {
	fn, _ := tokenizeWhitespace(Args{"vocab_size": 32000})
	e := text(strings.Repeat("the quick brown fox jumps over the lazy dog ", 10))
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Tensors[0].Data)))
	for i := 0; i < b.N; i++ {
		if _, err := fn(&FnContext{}, e); err != nil {
			b.Fatal(err)
		}
	}
}

// The fast paths of normalize (uint8 input, 3 channels, CHW, float32 and
// bfloat16) give what the general one gives.
func TestNormalizeFastPaths(t *testing.T) {
	img := rawImage(5, 7, 3, func(y, x, k int) uint8 { return uint8(37*y + 11*x + 90*k) })
	vals := make([]float32, len(img.Data))
	for i, v := range img.Data {
		vals[i] = float32(v)
	}
	f32, _ := tensor.FromFloat32s("image", []int64{5, 7, 3}, vals)
	for _, dtype := range []string{"float32", "bfloat16", "float16"} {
		f := mustMap(t, "normalize", Args{"scale": 1.0 / 255, "mean": []any{0.485, 0.456, 0.406}, "std": []any{0.229, 0.224, 0.225}, "layout": "chw", "dtype": dtype})
		fast, err := f(&FnContext{}, elem(img))
		if err != nil {
			t.Fatal(err)
		}
		slow, err := f(&FnContext{}, elem(f32)) // float input takes the general path
		if err != nil {
			t.Fatal(err)
		}
		a, b := fast.Tensors[0], slow.Tensors[0]
		if !reflect.DeepEqual(a.Shape, []int64{3, 5, 7}) || a.DType.String() != dtype || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("%s: fast path %s%v differs from the general one", dtype, a.DType, a.Shape)
		}
		if got := a.Float64At(2*35 + 3*7 + 4); math.Abs(got-(float64(img.Data[(3*7+4)*3+2])/255-0.406)/0.225) > 0.02 {
			t.Fatalf("%s: channel 2 at (3, 4) = %v", dtype, got)
		}
	}
}
