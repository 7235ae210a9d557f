package fn

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

func encodeJPEG(t testing.TB, img image.Image, q int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withSize patches a JPEG's frame header (or a PNG's IHDR, its CRC
// recomputed) to claim w × h.
func withSize(t testing.TB, b []byte, w, h int) []byte {
	t.Helper()
	b = bytes.Clone(b)
	if bytes.HasPrefix(b, []byte("\x89PNG")) {
		binary.BigEndian.PutUint32(b[16:], uint32(w))
		binary.BigEndian.PutUint32(b[20:], uint32(h))
		binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
		return b
	}
	for i := 2; i+9 < len(b); {
		m, n := b[i+1], int(binary.BigEndian.Uint16(b[i+2:]))
		if m >= 0xc0 && m <= 0xc2 {
			binary.BigEndian.PutUint16(b[i+5:], uint16(h))
			binary.BigEndian.PutUint16(b[i+7:], uint16(w))
			return b
		}
		i += 2 + n
	}
	t.Fatal("no frame header")
	return nil
}

// gradient is the picture of testdata/cmyk.jpg and progressive.jpg (made
// by PIL: Image.fromarray(gradient).convert("CMYK").save(q=95), and at
// twice the size with progressive=True, q=90).
func gradient(y, x, k int) int { return []int{x * 8, y * 10, 255 - x*8}[k] }

// Bad and unusual images: each is a clear error for its element (naming
// the file when the element has a path) or decodes correctly; none
// crashes or allocates what its header claims.
func TestBadImages(t *testing.T) {
	photo := encodeJPEG(t, photoLike(500, 375, 1), 90)
	cmyk, err := os.ReadFile("testdata/cmyk.jpg")
	if err != nil {
		t.Fatal(err)
	}
	progressive, err := os.ReadFile("testdata/progressive.jpg")
	if err != nil {
		t.Fatal(err)
	}
	var png16, gray16 bytes.Buffer
	rgba64 := image.NewRGBA64(image.Rect(0, 0, 20, 10))
	g16 := image.NewGray16(image.Rect(0, 0, 20, 10))
	for y := 0; y < 10; y++ {
		for x := 0; x < 20; x++ {
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(x * 3000), uint16(y * 6000), 40000, 65535})
			g16.SetGray16(x, y, color.Gray16{uint16(x*3000 + 255)})
		}
	}
	png.Encode(&png16, rgba64)
	png.Encode(&gray16, g16)
	var smallPNG bytes.Buffer
	png.Encode(&smallPNG, image.NewRGBA(image.Rect(0, 0, 8, 8)))
	tiny := encodeJPEG(t, photoLike(5, 3, 2), 90)

	decode := mustMap(t, "decode_image", nil)
	fused := mustMap(t, "decode_and_crop", Args{"height": 224, "width": 224, "channels": 3})
	type want struct {
		err   string  // error substring, or "" for a decoded image
		shape []int64 // decode_image's shape
	}
	cases := []struct {
		name string
		data []byte
		want want
	}{
		{"empty", nil, want{err: "decode"}},
		{"garbage", []byte("not an image at all"), want{err: "unknown format"}},
		{"jpeg magic then garbage", append([]byte{0xff, 0xd8, 0xff, 0xe0, 0, 16}, bytes.Repeat([]byte{0x55}, 64)...), want{err: "JPEG"}},
		{"truncated in the header", photo[:100], want{err: "truncated"}},
		{"truncated at half the data", photo[:len(photo)/2], want{err: "truncated"}},
		{"truncated before EOI", photo[:len(photo)-2], want{err: "truncated"}},
		{"CMYK JPEG (Adobe)", cmyk, want{shape: []int64{24, 32, 3}}},
		{"progressive JPEG", progressive, want{shape: []int64{48, 64, 3}}},
		{"16-bit RGBA PNG", png16.Bytes(), want{shape: []int64{10, 20, 3}}},
		{"16-bit gray PNG", gray16.Bytes(), want{shape: []int64{10, 20, 1}}},
		{"JPEG bomb 65535x65535", withSize(t, photo, 65535, 65535), want{err: "exceeds max_pixels"}},
		{"PNG bomb 65535x65535", withSize(t, smallPNG.Bytes(), 65535, 65535), want{err: "exceeds max_pixels"}},
		{"JPEG header larger than its data", withSize(t, photo, 4000, 3000), want{err: "JPEG"}},
		{"image smaller than the crop", tiny, want{shape: []int64{3, 5, 3}}},
	}
	for _, c := range cases {
		for _, op := range []string{"decode_image", "decode_and_crop"} {
			f := decode
			if op == "decode_and_crop" {
				f = fused
			}
			e := elem(tensor.BytesScalar("image", c.data), tensor.BytesScalar("path", []byte("/data/cat/x.jpg")))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out, err := f(&FnContext{Seed: 1}, e)
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("%s: %s allocated %d MiB", c.name, op, grew>>20)
			}
			if c.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.want.err) || !strings.Contains(err.Error(), op+": /data/cat/x.jpg: ") {
					t.Errorf("%s: %s: error %v, want one naming the op, the path and %q", c.name, op, err, c.want.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s: %v", c.name, op, err)
				continue
			}
			img, _ := out.Get("image")
			shape := c.want.shape
			if op == "decode_and_crop" {
				shape = []int64{224, 224, 3}
			}
			if img.DType != tensor.Uint8 || !slicesEqual(img.Shape, shape) || len(img.Data) != int(shape[0]*shape[1]*shape[2]) {
				t.Errorf("%s: %s: %s%v, want uint8%v", c.name, op, img.DType, img.Shape, shape)
			}
		}
	}
	// What the unusual ones decode to.
	check := func(name string, data []byte, scale int, tol float64) {
		out, err := decode(&FnContext{}, elem(tensor.BytesScalar("image", data)))
		if err != nil {
			t.Fatal(err)
		}
		img, _ := out.Get("image")
		h, w := int(img.Shape[0]), int(img.Shape[1])
		var sum float64
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				for k := 0; k < 3; k++ {
					d := float64(int(img.Data[(y*w+x)*3+k]) - gradient(y/scale, x/scale, k))
					sum += max(d, -d)
				}
			}
		}
		if mad := sum / float64(h*w*3); mad > tol {
			t.Errorf("%s: mean |diff| %.2f from the picture it holds", name, mad)
		}
	}
	check("CMYK JPEG", cmyk, 1, 4)
	check("progressive JPEG", progressive, 2, 4)
	out, _ := decode(&FnContext{}, elem(tensor.BytesScalar("image", png16.Bytes())))
	if img := out.Tensors[0]; img.Data[(5*20+7)*3] != uint8(7*3000>>8) || img.Data[(5*20+7)*3+1] != uint8(5*6000>>8) {
		t.Errorf("16-bit PNG: pixel (7, 5) = %v", img.Data[(5*20+7)*3:(5*20+7)*3+3])
	}
	// random_crop refuses an image smaller than its window; random_resized_crop upsamples.
	small := rawImage(3, 5, 3, func(y, x, k int) uint8 { return uint8(50*y + 10*x + k) })
	if _, err := mustMap(t, "random_crop", Args{"height": 224, "width": 224})(&FnContext{}, elem(small)); err == nil || !strings.Contains(err.Error(), "smaller than the crop") {
		t.Errorf("random_crop of a small image: %v", err)
	}
	if out, err := mustMap(t, "random_resized_crop", Args{"height": 224, "width": 224})(&FnContext{}, elem(small)); err != nil || !slicesEqual(out.Tensors[0].Shape, []int64{224, 224, 3}) {
		t.Errorf("random_resized_crop of a small image: %v", err)
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzDecodeJPEG feeds the decoders (libjpeg-turbo through cgo when the
// build has it) arbitrary bytes: no input may crash the process, hang or
// give an image whose shape disagrees with its data. The seeds are valid
// JPEGs (baseline 4:2:0, gray, progressive, CMYK) and cuts of them.
func FuzzDecodeJPEG(f *testing.F) {
	seeds := [][]byte{
		encodeJPEG(f, photoLike(40, 30, 3), 90),
		encodeJPEG(f, image.NewGray(image.Rect(0, 0, 17, 9)), 50),
	}
	for _, p := range []string{"testdata/cmyk.jpg", "testdata/progressive.jpg"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, s := range seeds {
		f.Add(s, uint8(0), uint16(0))
		f.Add(s[:len(s)*2/3], uint8(3), uint16(7))
	}
	decode, err := decodeImage(Args{"max_pixels": 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	fused, err := decodeAndCrop(Args{"height": 16, "width": 24, "max_pixels": 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, channels uint8, seed uint16) {
		e := elem(tensor.BytesScalar("image", b))
		ctx := &FnContext{Seed: uint64(seed)}
		for _, fn := range []MapFn{decode, fused} {
			out, err := fn(ctx, e)
			if err != nil {
				continue
			}
			img, _ := out.Get("image")
			if err := img.Validate(); err != nil || len(img.Shape) != 3 {
				t.Fatalf("decoded %v: %v", img.Shape, err)
			}
		}
		c := []int{0, 1, 3, 4}[channels%4]
		if img, err := decodeAny(b, c, 1<<20); err == nil {
			if err := img.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
