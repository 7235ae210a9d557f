package fn

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoders for decode_image
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"

	"github.com/feedmesh/feedmesh/tensor"
)

// DefaultMaxPixels bounds the images decode_image accepts (width × height),
// so a small file claiming a huge size cannot exhaust memory.
const DefaultMaxPixels = 1 << 26

// decodeImage decodes a JPEG, PNG, GIF or WebP bytes scalar into uint8
// [H, W, C]. channels 0 gives 1 for grayscale images and 3 otherwise; 1, 3
// or 4 force that many (RGB to gray uses the ITU-R 601 luma weights).
func decodeImage(a Args) (MapFn, error) {
	var in, out string
	var channels, maxPixels int64
	err := func() (err error) {
		if err = a.Known("tensor", "output", "channels", "max_pixels"); err != nil {
			return
		}
		if in, err = stringArg(a, "tensor", "image"); err != nil {
			return
		}
		if out, err = stringArg(a, "output", in); err != nil {
			return
		}
		if channels, err = a.Int("channels", 0); err != nil {
			return
		}
		if channels != 0 && channels != 1 && channels != 3 && channels != 4 {
			return fmt.Errorf("channels: must be 0 (auto), 1, 3 or 4, got %d", channels)
		}
		maxPixels, err = positiveInt(a, "max_pixels", DefaultMaxPixels, 1<<32)
		return
	}()
	if err != nil {
		return nil, argError("decode_image", err)
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, in)
		if err != nil {
			return e, err
		}
		b, err := bytesScalar(t)
		if err != nil {
			return e, err
		}
		img, err := decodeAny(b, int(channels), maxPixels)
		if err != nil {
			return e, elemError(e, "decode_image", err)
		}
		img.Name = out
		return with(e, img), nil
	}, nil
}

// decodeAny decodes a JPEG (libjpeg-turbo when available, else
// image/jpeg), PNG, GIF or WebP into uint8 [H, W, c]: channels 0 gives 1
// for grayscale images and 3 otherwise.
func decodeAny(b []byte, channels int, maxPixels int64) (tensor.Tensor, error) {
	if w, h, comps, scan, isJPEG, err := jpegMarkers(b); isJPEG {
		if err != nil {
			return tensor.Tensor{}, err
		}
		if int64(w)*int64(h) > maxPixels {
			return tensor.Tensor{}, tooLarge("jpeg", w, h, maxPixels)
		}
		if !jpegComplete(b, scan) {
			return tensor.Tensor{}, errTruncatedJPEG
		}
		if turbo() && (comps == 1 || comps == 3) {
			c := channels
			if c == 0 {
				c = 3
				if comps == 1 {
					c = 1
				}
			}
			pix := make([]byte, w*h*c)
			gw, gh, _, _, err := turboDecode(b, 1, c, region{}, maxPixels, pix)
			switch {
			case err == nil && gw == w && gh == h:
				return tensor.Tensor{DType: tensor.Uint8, Shape: []int64{int64(h), int64(w), int64(c)}, Data: pix}, nil
			case err == nil:
				return tensor.Tensor{}, fmt.Errorf("jpeg: frame header says %dx%d, libjpeg decoded %dx%d", w, h, gw, gh)
			case err != errUnsupportedJPEG:
				return tensor.Tensor{}, fmt.Errorf("jpeg: %w", err)
			}
			// CMYK and YCCK: image/jpeg converts them.
		}
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return tensor.Tensor{}, err
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return tensor.Tensor{}, tooLarge(format, cfg.Width, cfg.Height, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("%s: %w", format, err)
	}
	c := channels
	if c == 0 {
		c = 3
		switch img.(type) {
		case *image.Gray, *image.Gray16:
			c = 1
		}
	}
	return toHWC("", img, c), nil
}

func tooLarge(format string, w, h int, maxPixels int64) error {
	return fmt.Errorf("%s image of %dx%d exceeds max_pixels (%d)", format, w, h, maxPixels)
}

// elemError prefixes err with the op's name and, when the element has a
// path (image_folder, whole_file), the file it came from.
func elemError(e tensor.Element, op string, err error) error {
	if p, ok := e.Get("path"); ok && p.DType == tensor.Bytes && len(p.Offsets) == 2 {
		return fmt.Errorf("%s: %s: %w", op, p.Entry(0), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// toHWC converts an image to a uint8 [H, W, c] tensor, with fast paths for
// the types the standard decoders return.
func toHWC(name string, img image.Image, c int) tensor.Tensor {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	pix := make([]byte, w*h*c)
	put := func(i int, cr, cg, cb, ca uint8) {
		p := pix[i*c : i*c+c]
		switch c {
		case 1:
			p[0] = uint8((19595*uint32(cr) + 38470*uint32(cg) + 7471*uint32(cb) + 1<<15) >> 16)
		case 3:
			p[0], p[1], p[2] = cr, cg, cb
		default:
			p[0], p[1], p[2], p[3] = cr, cg, cb, ca
		}
	}
	switch m := img.(type) {
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi, ci := m.YOffset(r.Min.X+x, r.Min.Y+y), m.COffset(r.Min.X+x, r.Min.Y+y)
				cr, cg, cb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				put(y*w+x, cr, cg, cb, 255)
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := m.Pix[(y)*m.Stride : y*m.Stride+w]
			for x, v := range row {
				if c == 1 {
					pix[y*w+x] = v
				} else {
					put(y*w+x, v, v, v, 255)
				}
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := 0; x < w; x++ {
				put(y*w+x, row[4*x], row[4*x+1], row[4*x+2], row[4*x+3])
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				n := color.NRGBAModel.Convert(img.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA)
				put(y*w+x, n.R, n.G, n.B, n.A)
			}
		}
	}
	return tensor.Tensor{Name: name, DType: tensor.Uint8, Shape: []int64{int64(h), int64(w), int64(c)}, Data: pix}
}

// hwc checks that t is [H, W, C] (or [H, W]) and returns the dimensions and
// the number of values per pixel.
func hwc(t *tensor.Tensor) (h, w, c int, err error) {
	if t.DType == tensor.Bytes || (len(t.Shape) != 2 && len(t.Shape) != 3) {
		return 0, 0, 0, fmt.Errorf("tensor %q: want an image [height, width, channels], have %s%v", t.Name, t.DType, t.Shape)
	}
	if err := t.Validate(); err != nil {
		return 0, 0, 0, err
	}
	c = 1
	if len(t.Shape) == 3 {
		c = int(t.Shape[2])
	}
	return int(t.Shape[0]), int(t.Shape[1]), c, nil
}

func imageArgs(fn string, a Args, extra ...string) (name string, height, width int64, err error) {
	if err = a.Known(append([]string{"tensor", "height", "width"}, extra...)...); err != nil {
		return
	}
	if name, err = stringArg(a, "tensor", "image"); err != nil {
		return
	}
	if height, err = positiveInt(a, "height", 0, 1<<16); err != nil {
		return
	}
	width, err = positiveInt(a, "width", 0, 1<<16)
	return
}

// resize scales a uint8 [H, W, C] (or [H, W]) image to [height, width,
// C] as PIL's Image.resize does (resample.go): bilinear (default), area or
// bicubic, antialiased when downscaling.
func resize(a Args) (MapFn, error) {
	name, height, width, err := imageArgs("resize", a, "interpolation")
	var f interp
	if err == nil {
		f, err = interpArg(a)
	}
	if err != nil {
		return nil, argError("resize", err)
	}
	oh, ow := int(height), int(width)
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, name)
		if err != nil {
			return e, err
		}
		h, w, c, err := uint8Image("resize", t)
		if err != nil {
			return e, err
		}
		out := make([]byte, oh*ow*c)
		r := resamplers.Get().(*resampler)
		r.resizeImage(out, ow, oh, t.Data, w, h, w*c, c, [4]float64{0, 0, float64(w), float64(h)}, f)
		resamplers.Put(r)
		shape := []int64{int64(oh), int64(ow), int64(c)}
		if len(t.Shape) == 2 {
			shape = shape[:2]
		}
		return with(e, tensor.Tensor{Name: name, DType: tensor.Uint8, Shape: shape, Data: out}), nil
	}, nil
}

// uint8Image checks that t is a non-empty uint8 image of 1 to 4 channels.
func uint8Image(op string, t *tensor.Tensor) (h, w, c int, err error) {
	h, w, c, err = hwc(t)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	if t.DType != tensor.Uint8 || c < 1 || c > 4 {
		return 0, 0, 0, fmt.Errorf("%s: tensor %q: want uint8 with 1 to 4 channels, have %s%v (%s before normalize)", op, t.Name, t.DType, t.Shape, op)
	}
	if h == 0 || w == 0 {
		return 0, 0, 0, fmt.Errorf("%s: tensor %q: empty image %v", op, t.Name, t.Shape)
	}
	return h, w, c, nil
}

// randomCrop cuts a [height, width] window at a random position out of an
// [H, W, …] tensor of any numeric dtype.
func randomCrop(a Args) (MapFn, error) {
	name, height, width, err := imageArgs("random_crop", a)
	if err != nil {
		return nil, argError("random_crop", err)
	}
	ch, cw := int(height), int(width)
	return func(ctx *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, name)
		if err != nil {
			return e, err
		}
		h, w, c, err := hwc(t)
		if err != nil {
			return e, fmt.Errorf("random_crop: %w", err)
		}
		if h < ch || w < cw {
			return e, fmt.Errorf("random_crop: tensor %q of %dx%d is smaller than the crop %dx%d (resize first)", name, h, w, ch, cw)
		}
		r := ctx.Rand()
		y0, x0 := r.IntN(h-ch+1), r.IntN(w-cw+1)
		px := c * t.DType.Size()
		out := make([]byte, 0, ch*cw*px)
		for y := y0; y < y0+ch; y++ {
			row := t.Data[(y*w+x0)*px:]
			out = append(out, row[:cw*px]...)
		}
		shape := append([]int64{int64(ch), int64(cw)}, t.Shape[2:]...)
		return with(e, tensor.Tensor{Name: name, DType: t.DType, Shape: shape, Data: out}), nil
	}, nil
}

// randomFlip mirrors an [H, W, …] tensor left-right (horizontal, default
// on) and/or upside down (vertical, default off), each with probability ½.
func randomFlip(a Args) (MapFn, error) {
	var name string
	var horiz, vert bool
	err := func() (err error) {
		if err = a.Known("tensor", "horizontal", "vertical"); err != nil {
			return
		}
		if name, err = stringArg(a, "tensor", "image"); err != nil {
			return
		}
		if horiz, err = a.Bool("horizontal", true); err != nil {
			return
		}
		vert, err = a.Bool("vertical", false)
		return
	}()
	if err != nil {
		return nil, argError("random_flip", err)
	}
	return func(ctx *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, name)
		if err != nil {
			return e, err
		}
		h, w, c, err := hwc(t)
		if err != nil {
			return e, fmt.Errorf("random_flip: %w", err)
		}
		r := ctx.Rand()
		fh := horiz && r.IntN(2) == 1
		fv := vert && r.IntN(2) == 1
		if !fh && !fv {
			return e, nil
		}
		return with(e, flip(t, h, w, c, fh, fv)), nil
	}, nil
}

func flip(t *tensor.Tensor, h, w, c int, fh, fv bool) tensor.Tensor {
	px := c * t.DType.Size()
	out := make([]byte, len(t.Data))
	for y := 0; y < h; y++ {
		sy := y
		if fv {
			sy = h - 1 - y
		}
		src := t.Data[sy*w*px : (sy+1)*w*px]
		dst := out[y*w*px : (y+1)*w*px]
		if !fh {
			copy(dst, src)
			continue
		}
		switch px {
		case 1:
			for x, v := range src {
				dst[w-1-x] = v
			}
		case 3:
			for x, j := 0, 3*(w-1); j >= 0; x, j = x+3, j-3 {
				d, s := dst[x:x+3], src[j:j+3]
				d[0], d[1], d[2] = s[0], s[1], s[2]
			}
		default:
			for x := 0; x < w; x++ {
				copy(dst[x*px:(x+1)*px], src[(w-1-x)*px:(w-x)*px])
			}
		}
	}
	return tensor.Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64(nil), t.Shape...), Data: out}
}
