package fn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/feedmesh/feedmesh/tensor"
)

// cropArgs are random_resized_crop's and decode_and_crop's shared args:
// torchvision's RandomResizedCrop(size, scale, ratio, interpolation).
type cropArgs struct {
	name, out     string
	height, width int
	scale, ratio  [2]float64
	interp        interp
}

func parseCropArgs(op string, a Args, extra ...string) (c cropArgs, err error) {
	var h, w int64
	if err = a.Known(append([]string{"tensor", "output", "height", "width", "scale", "ratio", "interpolation"}, extra...)...); err != nil {
		return
	}
	if c.name, err = stringArg(a, "tensor", "image"); err != nil {
		return
	}
	if c.out, err = stringArg(a, "output", c.name); err != nil {
		return
	}
	if h, err = positiveInt(a, "height", 0, 1<<14); err != nil {
		return
	}
	if w, err = positiveInt(a, "width", 0, 1<<14); err != nil {
		return
	}
	c.height, c.width = int(h), int(w)
	if c.scale, err = rangeArg(a, "scale", [2]float64{0.08, 1}); err != nil {
		return
	}
	if c.scale[0] <= 0 || c.scale[1] > 1 {
		return c, fmt.Errorf("scale: %v must lie in (0, 1]", c.scale)
	}
	if c.ratio, err = rangeArg(a, "ratio", [2]float64{3.0 / 4, 4.0 / 3}); err != nil {
		return
	}
	if c.ratio[0] <= 0 {
		return c, fmt.Errorf("ratio: %v must be > 0", c.ratio)
	}
	c.interp, err = interpArg(a)
	return
}

// rangeArg reads a [lo, hi] pair with 0 < lo <= hi.
func rangeArg(a Args, key string, def [2]float64) ([2]float64, error) {
	l, err := a.FloatList(key, def[:])
	if err != nil {
		return def, err
	}
	if len(l) != 2 || !(l[0] <= l[1]) || math.IsInf(l[1], 0) {
		return def, fmt.Errorf("%s: want [low, high] with low <= high, got %v", key, l)
	}
	return [2]float64{l[0], l[1]}, nil
}

// window is torchvision's RandomResizedCrop.get_params for an image of
// width × height: up to 10 draws of an area fraction in scale and a log-
// uniform aspect ratio in ratio, the first that fits placed uniformly;
// else the center crop of the whole image clamped to ratio.
func (c *cropArgs) window(r *rand.Rand, width, height int) region {
	area := float64(width) * float64(height)
	lr0, lr1 := math.Log(c.ratio[0]), math.Log(c.ratio[1])
	for range 10 {
		target := area * (c.scale[0] + (c.scale[1]-c.scale[0])*r.Float64())
		aspect := math.Exp(lr0 + (lr1-lr0)*r.Float64())
		w := int(math.RoundToEven(math.Sqrt(target * aspect)))
		h := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if 0 < w && w <= width && 0 < h && h <= height {
			y := r.IntN(height - h + 1)
			x := r.IntN(width - w + 1)
			return region{x, y, w, h}
		}
	}
	inRatio := float64(width) / float64(height)
	w, h := width, height
	switch {
	case inRatio < c.ratio[0]:
		h = int(math.RoundToEven(float64(w) / c.ratio[0]))
	case inRatio > c.ratio[1]:
		w = int(math.RoundToEven(float64(h) * c.ratio[1]))
	}
	w, h = min(max(w, 1), width), min(max(h, 1), height)
	return region{(width - w) / 2, (height - h) / 2, w, h}
}

// randomResizedCrop is torchvision's RandomResizedCrop on a decoded uint8
// [H, W, C] image: a random window (scale of the area, aspect ratio in
// ratio), resized to [height, width] as PIL resizes it.
func randomResizedCrop(a Args) (MapFn, error) {
	ca, err := parseCropArgs("random_resized_crop", a)
	if err != nil {
		return nil, argError("random_resized_crop", err)
	}
	return func(ctx *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, ca.name)
		if err != nil {
			return e, err
		}
		h, w, c, err := uint8Image("random_resized_crop", t)
		if err != nil {
			return e, err
		}
		win := ca.window(ctx.Rand(), w, h)
		out := ca.cropResize(t.Data, w, c, win, nil)
		return with(e, ca.tensor(out, c, len(t.Shape) == 2)), nil
	}, nil
}

func (ca *cropArgs) tensor(data []byte, c int, rank2 bool) tensor.Tensor {
	shape := []int64{int64(ca.height), int64(ca.width), int64(c)}
	if rank2 {
		shape = shape[:2]
	}
	return tensor.Tensor{Name: ca.out, DType: tensor.Uint8, Shape: shape, Data: data}
}

// cropResize resizes the window win of an image w pixels wide (c bytes
// each) to the output size, into a new buffer. box, when set, is the part
// of win to resample, in win's pixels (decode_and_crop's fractional box
// after DCT scaling); else all of it.
func (ca *cropArgs) cropResize(pix []byte, w, c int, win region, box *[4]float64) []byte {
	out := make([]byte, ca.height*ca.width*c)
	b := [4]float64{0, 0, float64(win.w), float64(win.h)}
	if box != nil {
		b = *box
	}
	r := resamplers.Get().(*resampler)
	r.resizeImage(out, ca.width, ca.height, pix[(win.y*w+win.x)*c:], win.w, win.h, w*c, c, b, ca.interp)
	resamplers.Put(r)
	return out
}

// decodeAndCrop is decode_image followed by random_resized_crop, fused:
// for a JPEG (with libjpeg-turbo) the window is drawn from the frame
// header's size, as it would be from the decoded image's, and only the
// rows and iMCU columns that hold it are decoded, at the smallest DCT
// scale (1/2, 1/4, 1/8) that keeps the window at least the output's size
// (dct_scaling: false decodes at full size). Other images, and JPEGs
// without libjpeg-turbo, are decoded whole and then cropped: the same
// window for the same (seed, split, element).
func decodeAndCrop(a Args) (MapFn, error) {
	var channels, maxPixels int64
	var dctScaling bool
	ca, err := parseCropArgs("decode_and_crop", a, "channels", "max_pixels", "dct_scaling")
	if err == nil {
		err = func() (err error) {
			if channels, err = a.Int("channels", 0); err != nil {
				return
			}
			if channels != 0 && channels != 1 && channels != 3 && channels != 4 {
				return fmt.Errorf("channels: must be 0 (auto), 1, 3 or 4, got %d", channels)
			}
			if maxPixels, err = positiveInt(a, "max_pixels", DefaultMaxPixels, 1<<32); err != nil {
				return
			}
			dctScaling, err = a.Bool("dct_scaling", true)
			return
		}()
	}
	if err != nil {
		return nil, argError("decode_and_crop", err)
	}
	return func(ctx *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, ca.name)
		if err != nil {
			return e, err
		}
		b, err := bytesScalar(t)
		if err != nil {
			return e, fmt.Errorf("decode_and_crop: %w", err)
		}
		if w, h, comps, scan, isJPEG, err := jpegMarkers(b); isJPEG && err == nil && turbo() && (comps == 1 || comps == 3) {
			if int64(w)*int64(h) > maxPixels {
				return e, elemError(e, "decode_and_crop", tooLarge("jpeg", w, h, maxPixels))
			}
			if !jpegComplete(b, scan) {
				return e, elemError(e, "decode_and_crop", errTruncatedJPEG)
			}
			c := int(channels)
			if c == 0 {
				c = 3
				if comps == 1 {
					c = 1
				}
			}
			out, err := ca.turboCrop(ctx, b, w, h, c, maxPixels, dctScaling)
			if err == nil {
				return with(e, ca.tensor(out, c, false)), nil
			}
			if err != errUnsupportedJPEG {
				return e, elemError(e, "decode_and_crop", fmt.Errorf("jpeg: %w", err))
			}
		}
		img, err := decodeAny(b, int(channels), maxPixels)
		if err != nil {
			return e, elemError(e, "decode_and_crop", err)
		}
		h, w, c := int(img.Shape[0]), int(img.Shape[1]), int(img.Shape[2])
		win := ca.window(ctx.Rand(), w, h)
		return with(e, ca.tensor(ca.cropResize(img.Data, w, c, win, nil), c, false)), nil
	}, nil
}

// dctDenom is the DCT scale decode_and_crop decodes a window of cw × ch
// at for an output of ow × oh: the largest of 8, 4, 2 that leaves the
// scaled window at least the output's size, else 1.
func dctDenom(cw, ch, ow, oh int) int {
	for _, d := range []int{8, 4, 2} {
		if cw >= d*ow && ch >= d*oh {
			return d
		}
	}
	return 1
}

func (ca *cropArgs) turboCrop(ctx *FnContext, b []byte, w, h, c int, maxPixels int64, dctScaling bool) ([]byte, error) {
	win := ca.window(ctx.Rand(), w, h)
	d := 1
	if dctScaling {
		d = dctDenom(win.w, win.h, ca.width, ca.height)
	}
	// The window in the scaled image's pixels, and the whole pixels that
	// cover it: decoded, then resampled from the fractional box.
	sw, sh := scaledSize(w, d), scaledSize(h, d)
	fx0, fy0 := float64(win.x)/float64(d), float64(win.y)/float64(d)
	fx1, fy1 := float64(win.x+win.w)/float64(d), float64(win.y+win.h)/float64(d)
	x0, y0 := int(fx0), int(fy0)
	x1, y1 := min(int(math.Ceil(fx1)), sw), min(int(math.Ceil(fy1)), sh)
	reg := region{x0, y0, x1 - x0, y1 - y0}
	r := resamplers.Get().(*resampler)
	defer resamplers.Put(r)
	r.img = grow(r.img, reg.w*reg.h*c)
	gw, gh, iw, ih, err := turboDecode(b, d, c, reg, maxPixels, r.img)
	if err != nil {
		return nil, err
	}
	if gw != reg.w || gh != reg.h || iw != w || ih != h {
		return nil, fmt.Errorf("decoded %dx%d of a %dx%d image, want %dx%d of %dx%d", gw, gh, iw, ih, reg.w, reg.h, w, h)
	}
	out := make([]byte, ca.height*ca.width*c)
	box := [4]float64{fx0 - float64(x0), fy0 - float64(y0), fx1 - float64(x0), fy1 - float64(y0)}
	r.resizeImage(out, ca.width, ca.height, r.img, reg.w, reg.h, reg.w*c, c, box, ca.interp)
	return out, nil
}
