package fn

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoders for decode_image
	_ "image/jpeg"
	_ "image/png"

	"golang.org/x/image/draw"
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
		cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
		if err != nil {
			return e, fmt.Errorf("decode_image: %w", err)
		}
		if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
			return e, fmt.Errorf("decode_image: %s image of %dx%d exceeds max_pixels (%d)", format, cfg.Width, cfg.Height, maxPixels)
		}
		img, _, err := image.Decode(bytes.NewReader(b))
		if err != nil {
			return e, fmt.Errorf("decode_image: %s: %w", format, err)
		}
		c := int(channels)
		if c == 0 {
			c = 3
			if _, gray := img.(*image.Gray); gray {
				c = 1
			}
		}
		return with(e, toHWC(out, img, c)), nil
	}, nil
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

// resize scales a uint8 [H, W, C] image (C = 1, 3 or 4) to [height, width,
// C] with bilinear interpolation (golang.org/x/image/draw).
func resize(a Args) (MapFn, error) {
	name, height, width, err := imageArgs("resize", a)
	if err != nil {
		return nil, argError("resize", err)
	}
	oh, ow := int(height), int(width)
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, name)
		if err != nil {
			return e, err
		}
		h, w, c, err := hwc(t)
		if err != nil {
			return e, fmt.Errorf("resize: %w", err)
		}
		if t.DType != tensor.Uint8 || (c != 1 && c != 3 && c != 4) {
			return e, fmt.Errorf("resize: tensor %q: want uint8 with 1, 3 or 4 channels, have %s%v (resize before normalize)", name, t.DType, t.Shape)
		}
		if h == 0 || w == 0 {
			return e, fmt.Errorf("resize: tensor %q: empty image %v", name, t.Shape)
		}
		src := image.NewRGBA(image.Rect(0, 0, w, h))
		var srcImg image.Image = src
		switch c {
		case 1:
			srcImg = &image.Gray{Pix: t.Data, Stride: w, Rect: src.Rect}
		case 3:
			for i, j := 0, 0; i < len(t.Data); i, j = i+3, j+4 {
				src.Pix[j], src.Pix[j+1], src.Pix[j+2], src.Pix[j+3] = t.Data[i], t.Data[i+1], t.Data[i+2], 255
			}
		case 4:
			srcImg = &image.NRGBA{Pix: t.Data, Stride: 4 * w, Rect: src.Rect}
		}
		dst := image.NewRGBA(image.Rect(0, 0, ow, oh))
		draw.BiLinear.Scale(dst, dst.Rect, srcImg, srcImg.Bounds(), draw.Src, nil)
		out := make([]byte, oh*ow*c)
		for i := 0; i < oh*ow; i++ {
			p := dst.Pix[4*i : 4*i+4]
			switch c {
			case 1:
				out[i] = p[0]
			case 3:
				copy(out[3*i:3*i+3], p[:3])
			case 4: // back from premultiplied alpha
				q := out[4*i : 4*i+4]
				q[3] = p[3]
				for k := 0; k < 3; k++ {
					if p[3] != 0 {
						q[k] = uint8(min(255, (uint32(p[k])*255+uint32(p[3])/2)/uint32(p[3])))
					}
				}
			}
		}
		shape := []int64{int64(oh), int64(ow), int64(c)}
		if len(t.Shape) == 2 {
			shape = shape[:2]
		}
		return with(e, tensor.Tensor{Name: name, DType: tensor.Uint8, Shape: shape, Data: out}), nil
	}, nil
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
		for x := 0; x < w; x++ {
			copy(dst[x*px:(x+1)*px], src[(w-1-x)*px:(w-x)*px])
		}
	}
	return tensor.Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64(nil), t.Shape...), Data: out}
}

// normalize computes (x·scale − mean[c]) / std[c] per channel (the last
// dimension) and outputs float32 of the same shape. mean and std have one
// entry (all channels) or one per channel.
func normalize(a Args) (MapFn, error) {
	var name string
	var mean, std []float64
	var scale float64
	err := func() (err error) {
		if err = a.Known("tensor", "mean", "std", "scale"); err != nil {
			return
		}
		if name, err = stringArg(a, "tensor", "image"); err != nil {
			return
		}
		if mean, err = a.FloatList("mean", []float64{0}); err != nil {
			return
		}
		if std, err = a.FloatList("std", []float64{1}); err != nil {
			return
		}
		if scale, err = a.Float("scale", 1); err != nil {
			return
		}
		if len(mean) == 0 {
			return fmt.Errorf("mean: must not be empty")
		}
		if len(std) == 0 {
			return fmt.Errorf("std: must not be empty")
		}
		for i, s := range std {
			if s == 0 {
				return fmt.Errorf("std[%d]: must not be 0", i)
			}
		}
		if len(mean) != 1 && len(std) != 1 && len(mean) != len(std) {
			return fmt.Errorf("std: has %d entries but mean has %d", len(std), len(mean))
		}
		return nil
	}()
	if err != nil {
		return nil, argError("normalize", err)
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, name)
		if err != nil {
			return e, err
		}
		if t.DType == tensor.Bytes {
			return e, fmt.Errorf("normalize: tensor %q is bytes (decode it first)", name)
		}
		if err := t.Validate(); err != nil {
			return e, fmt.Errorf("normalize: %w", err)
		}
		c := 1
		if len(t.Shape) > 0 {
			c = int(t.Shape[len(t.Shape)-1])
		}
		for _, l := range [][]float64{mean, std} {
			if len(l) != 1 && len(l) != c {
				return e, fmt.Errorf("normalize: tensor %q has %d channels but mean/std have %d entries", name, c, len(l))
			}
		}
		// Per-channel multiplier and offset: x*mul[c] + add[c].
		mul, add := make([]float32, max(c, 1)), make([]float32, max(c, 1))
		for k := range mul {
			m, s := mean[min(k, len(mean)-1)], std[min(k, len(std)-1)]
			mul[k], add[k] = float32(scale/s), float32(-m/s)
		}
		n := int(t.NumValues())
		vals := make([]float32, n)
		if t.DType == tensor.Uint8 {
			for i, v := range t.Data[:n] {
				k := i % c
				vals[i] = float32(v)*mul[k] + add[k]
			}
		} else {
			for i := range vals {
				k := i % c
				vals[i] = float32(t.Float64At(i))*mul[k] + add[k]
			}
		}
		o, _ := tensor.FromFloat32s(name, append([]int64{}, t.Shape...), vals)
		return with(e, o), nil
	}, nil
}
