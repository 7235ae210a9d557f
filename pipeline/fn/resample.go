package fn

import (
	"fmt"
	"math"
	"sync"
)

// Resampling as Pillow's Image.resize does it (libImaging/Resample.c), so
// that resize and random_resized_crop match what PIL and torchvision
// produce: two separable passes over uint8 rows, horizontal then vertical
// (the intermediate rounded to uint8), each output value a weighted sum of
// the input values under the filter, with weights in fixed point (22
// fractional bits). When downscaling the filter is stretched by the scale
// (antialiasing), so bilinear averages over all the pixels an output pixel
// covers rather than sampling two; area is Pillow's BOX filter (the mean of
// the covered pixels, partial pixels weighted).

// interp is an interpolation filter.
type interp int

const (
	interpBilinear interp = iota
	interpArea
	interpBicubic
)

var interpNames = map[string]interp{"bilinear": interpBilinear, "area": interpArea, "bicubic": interpBicubic}

func interpArg(a Args) (interp, error) {
	s, err := a.String("interpolation", "bilinear")
	if err != nil {
		return 0, err
	}
	f, ok := interpNames[s]
	if !ok {
		return 0, fmt.Errorf("interpolation: %q is not bilinear, area or bicubic", s)
	}
	return f, nil
}

func (f interp) support() float64 {
	switch f {
	case interpArea:
		return 0.5
	case interpBicubic:
		return 2
	}
	return 1
}

func (f interp) at(x float64) float64 {
	switch f {
	case interpArea:
		if x > -0.5 && x <= 0.5 {
			return 1
		}
		return 0
	case interpBicubic:
		const a = -0.5
		if x < 0 {
			x = -x
		}
		if x < 1 {
			return float64(float64(float64((a+2)*x)-(a+3))*x*x) + 1
		}
		if x < 2 {
			return float64(float64(float64(float64(x-5)*x)+8)*x-4) * a
		}
		return 0
	}
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

const resamplePrecision = 32 - 8 - 2 // Pillow's PRECISION_BITS

// coeffs are one pass's weights: output i reads n[i] inputs from start[i]
// with weights k[i*ksize:].
type coeffs struct {
	in    int // the input's size along the axis
	ksize int
	start []int32
	n     []int32
	k     []int32
	f     []float64
}

// compute is Pillow's precompute_coeffs followed by normalize_coeffs_8bpc
// for the input span [in0, in1) of an axis of inSize pixels scaled to out.
// Pillow passes the box as C floats: in0 and in1 are rounded to float32
// first, as it does.
func (c *coeffs) compute(inSize int, in0, in1 float64, out int, f interp) {
	in0, in1 = float64(float32(in0)), float64(float32(in1))
	c.in = inSize
	scale := (in1 - in0) / float64(out)
	filterscale := max(scale, 1)
	support := f.support() * filterscale
	c.ksize = int(math.Ceil(support))*2 + 1
	c.start = grow(c.start, out)
	c.n = grow(c.n, out)
	c.k = grow(c.k, out*c.ksize)
	c.f = grow(c.f, c.ksize)
	ss := 1 / filterscale
	for xx := 0; xx < out; xx++ {
		center := in0 + float64(float64(xx)+0.5)*scale
		xmin := int(center - support + 0.5) // C's (int) truncates toward zero
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		if xmax > c.ksize { // cannot happen (ksize covers the support); keeps the slices in bounds
			xmax = c.ksize
		}
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w := f.at(float64(float64(float64(x+xmin)-center)+0.5) * ss)
			c.f[x] = w
			ww += w
		}
		k := c.k[xx*c.ksize : (xx+1)*c.ksize]
		for x := range k {
			v := 0.0
			if x < xmax {
				v = c.f[x]
				if ww != 0 {
					v /= ww
				}
			}
			if v < 0 {
				k[x] = int32(-0.5 + float64(v*(1<<resamplePrecision)))
			} else {
				k[x] = int32(0.5 + float64(v*(1<<resamplePrecision)))
			}
		}
		if xmax < 0 {
			xmax = 0
		}
		c.start[xx], c.n[xx] = int32(xmin), int32(xmax)
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// resampler holds the scratch of one resize: weights and the intermediate
// rows. Pooled, so that resizing allocates nothing in steady state but its
// output.
type resampler struct {
	h, v coeffs
	tmp  []byte
	img  []byte // decode_and_crop's decoded region
	pre  []byte // a 4-channel image premultiplied
	acc  []int32
}

var resamplers = sync.Pool{New: func() any { return new(resampler) }}

func clip8(v int32) byte {
	v >>= resamplePrecision
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// resize resamples the box [x0, x1) × [y0, y1) (in pixels, fractions
// allowed, inside [0, w] × [0, h]) of src, h rows of w pixels of c bytes
// each stride bytes apart, to dst, oh rows of ow pixels of c bytes. Pixels
// outside the box are read where the filter reaches them, but never
// outside src: crop first (pass the crop as src) to match PIL's
// crop-then-resize.
func (r *resampler) resize(dst []byte, ow, oh int, src []byte, w, h, stride, c int, box [4]float64, f interp) {
	needH := ow != w || box[0] != 0 || box[2] != float64(ow)
	needV := oh != h || box[1] != 0 || box[3] != float64(oh)
	r.h.compute(w, box[0], box[2], ow, f)
	r.v.compute(h, box[1], box[3], oh, f)
	if !needH && !needV {
		for y := 0; y < oh; y++ {
			copy(dst[y*ow*c:(y+1)*ow*c], src[y*stride:y*stride+w*c])
		}
		return
	}
	if !needV {
		resampleH(dst, ow*c, src, stride, 0, oh, c, &r.h)
		return
	}
	if needH {
		first := int(r.v.start[0])
		last := int(r.v.start[oh-1] + r.v.n[oh-1])
		for i := range r.v.start[:oh] {
			r.v.start[i] -= int32(first)
		}
		r.tmp = grow(r.tmp, (last-first)*ow*c)
		resampleH(r.tmp, ow*c, src, stride, first, last-first, c, &r.h)
		src, stride = r.tmp, ow*c
	}
	r.acc = grow(r.acc, ow*c)
	resampleV(dst, ow*c, src, stride, oh, &r.v, r.acc)
}

// resizeImage is resize, with 4-channel images (RGBA) resampled with
// premultiplied alpha as PIL does (RGBA → RGBa → resize → RGBA), so that
// transparent pixels' colors do not bleed into their neighbours.
func (r *resampler) resizeImage(dst []byte, ow, oh int, src []byte, w, h, stride, c int, box [4]float64, f interp) {
	if c != 4 {
		r.resize(dst, ow, oh, src, w, h, stride, c, box, f)
		return
	}
	pre := grow(r.pre, w*h*4)
	for y := 0; y < h; y++ {
		in, out := src[y*stride:y*stride+4*w], pre[y*4*w:(y+1)*4*w]
		for x := 0; x < len(in); x += 4 {
			a := uint32(in[x+3])
			for k := 0; k < 3; k++ {
				t := uint32(in[x+k])*a + 128
				out[x+k] = byte(((t >> 8) + t) >> 8)
			}
			out[x+3] = byte(a)
		}
	}
	r.pre = pre
	r.resize(dst, ow, oh, pre, w, h, 4*w, 4, box, f)
	for i := 0; i < len(dst); i += 4 {
		a := uint32(dst[i+3])
		if a == 0 || a == 255 {
			continue
		}
		for k := 0; k < 3; k++ {
			dst[i+k] = byte(min(255, 255*uint32(dst[i+k])/a))
		}
	}
}
