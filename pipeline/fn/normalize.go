package fn

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/feedmesh/feedmesh/tensor"
)

// normalize computes (x·scale − mean[c]) / std[c] per channel (the last
// dimension) and outputs float32 (or bfloat16, float16: dtype) of the same
// shape, or with layout: chw, an [H, W, C] image as [C, H, W] (what torch
// models take). mean and std have one entry (all channels) or one per
// channel. uint8 input goes through a table of the 256 results per
// channel, computed in float64 and rounded once. random_flip: true
// mirrors an image [H, W, C] left-right with probability ½ in the same
// pass (random_flip's horizontal flip, fused: no copy of its own).
func normalize(a Args) (MapFn, error) {
	n, err := parseNormalize(a)
	if err != nil {
		return nil, argError("normalize", err)
	}
	return func(ctx *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, n.name)
		if err != nil {
			return e, err
		}
		mirror := n.flip && ctx.Rand().IntN(2) == 1
		out, err := n.apply(t, mirror)
		if err != nil {
			return e, fmt.Errorf("normalize: %w", err)
		}
		return with(e, out), nil
	}, nil
}

// normalizer is one normalize op's arguments and its per-channel tables.
type normalizer struct {
	name      string
	mean, std []float64
	scale     float64
	dtype     tensor.DType
	chw       bool
	flip      bool     // random_flip
	tables    sync.Map // int (channels) → []uint32 (c*256 values' bits), built on first use
}

func parseNormalize(a Args) (n *normalizer, err error) {
	n = new(normalizer)
	if err = a.Known("tensor", "mean", "std", "scale", "dtype", "layout", "random_flip"); err != nil {
		return
	}
	if n.name, err = stringArg(a, "tensor", "image"); err != nil {
		return
	}
	if n.mean, err = a.FloatList("mean", []float64{0}); err != nil {
		return
	}
	if n.std, err = a.FloatList("std", []float64{1}); err != nil {
		return
	}
	if n.scale, err = a.Float("scale", 1); err != nil {
		return
	}
	dtypeName, err := a.String("dtype", "float32")
	if err != nil {
		return
	}
	switch dtypeName {
	case "float32":
		n.dtype = tensor.Float32
	case "bfloat16":
		n.dtype = tensor.BFloat16
	case "float16":
		n.dtype = tensor.Float16
	default:
		return nil, fmt.Errorf("dtype: %q is not float32, bfloat16 or float16", dtypeName)
	}
	layout, err := a.String("layout", "hwc")
	if err != nil {
		return
	}
	if layout != "hwc" && layout != "chw" {
		return nil, fmt.Errorf("layout: %q is not hwc or chw", layout)
	}
	n.chw = layout == "chw"
	if n.flip, err = a.Bool("random_flip", false); err != nil {
		return
	}
	return n, n.check()
}

// check validates mean and std.
func (n *normalizer) check() error {
	if len(n.mean) == 0 {
		return fmt.Errorf("mean: must not be empty")
	}
	if len(n.std) == 0 {
		return fmt.Errorf("std: must not be empty")
	}
	for i, s := range n.std {
		if s == 0 {
			return fmt.Errorf("std[%d]: must not be 0", i)
		}
	}
	if len(n.mean) != 1 && len(n.std) != 1 && len(n.mean) != len(n.std) {
		return fmt.Errorf("std: has %d entries but mean has %d", len(n.std), len(n.mean))
	}
	return nil
}

// table is the encoded results of the 256 uint8 values for each of c
// channels.
func (n *normalizer) table(c int) []uint32 {
	if v, ok := n.tables.Load(c); ok {
		return v.([]uint32)
	}
	lut := make([]uint32, c*256)
	for k := 0; k < c; k++ {
		m, s := n.mean[min(k, len(n.mean)-1)], n.std[min(k, len(n.std)-1)]
		for v := 0; v < 256; v++ {
			lut[k*256+v] = encodeFloat(n.dtype, (float64(v)*n.scale-m)/s)
		}
	}
	n.tables.Store(c, lut)
	return lut
}

// apply normalizes t into a new tensor, mirrored left-right when mirror.
func (n *normalizer) apply(t *tensor.Tensor, mirror bool) (tensor.Tensor, error) {
	if t.DType == tensor.Bytes {
		return tensor.Tensor{}, fmt.Errorf("tensor %q is bytes (decode it first)", n.name)
	}
	if err := t.Validate(); err != nil {
		return tensor.Tensor{}, err
	}
	if n.chw && len(t.Shape) != 3 {
		return tensor.Tensor{}, fmt.Errorf("layout chw: tensor %q is %v, not an image [H, W, C]", n.name, t.Shape)
	}
	if n.flip && len(t.Shape) != 3 {
		return tensor.Tensor{}, fmt.Errorf("random_flip: tensor %q is %v, not an image [H, W, C]", n.name, t.Shape)
	}
	c := 1
	if len(t.Shape) > 0 {
		c = int(t.Shape[len(t.Shape)-1])
	}
	for _, l := range [][]float64{n.mean, n.std} {
		if len(l) != 1 && len(l) != c {
			return tensor.Tensor{}, fmt.Errorf("tensor %q has %d channels but mean/std have %d entries", n.name, c, len(l))
		}
	}
	size := n.dtype.Size()
	nv := int(t.NumValues())
	out := make([]byte, nv*size)
	shape := append([]int64{}, t.Shape...)
	// Value i (in HWC order) goes to k*plane + i/c under chw.
	plane := 0
	if n.chw {
		plane = nv / max(c, 1)
		shape = []int64{t.Shape[2], t.Shape[0], t.Shape[1]}
	}
	width := 0
	if mirror {
		width = int(t.Shape[1])
	}
	switch {
	case t.DType == tensor.Uint8 && c == 3 && n.chw && size == 4 && nativeLE && plane > 0:
		chw3x32(out, t.Data[:nv], n.table(c), plane, width)
	case t.DType == tensor.Uint8 && c == 3 && n.chw && size == 2 && nativeLE && plane > 0:
		chw3x16(out, t.Data[:nv], n.table(c), plane, width)
	case mirror:
		// The other layouts and dtypes flip first, as random_flip does.
		m := flip(t, int(t.Shape[0]), width, c, true, false)
		return n.apply(&m, false)
	case t.DType == tensor.Uint8 && c > 0:
		normalizeUint8(out, t.Data[:nv], n.table(c), c, plane, size, n.chw)
	default:
		n.normalizeAny(out, t, c, plane, size)
	}
	return tensor.Tensor{Name: n.name, DType: n.dtype, Shape: shape, Data: out}, nil
}

// normalizeUint8 maps each byte of src through its channel's table into
// out (values of size bytes), transposed to planes of plane values under
// chw.
func normalizeUint8(out, src []byte, lut []uint32, c, plane, size int, chw bool) {
	switch {
	case chw:
		for i, v := range src {
			k := i % c
			put(out, size, k*plane+i/c, lut[k*256+int(v)])
		}
	case size == 4:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], lut[(i%c)*256+int(v)])
		}
	default:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(lut[(i%c)*256+int(v)]))
		}
	}
}

// chw3x32 is normalizeUint8 of a 3-channel image to float32 planes, with
// stores of whole words (out is word-aligned: a large allocation); width
// > 0 mirrors the rows of width pixels left-right.
func chw3x32(out, src []byte, lut []uint32, plane, width int) {
	o := unsafe.Slice((*uint32)(unsafe.Pointer(&out[0])), 3*plane)
	l0, l1, l2 := (*[256]uint32)(lut[:256]), (*[256]uint32)(lut[256:512]), (*[256]uint32)(lut[512:768])
	o0, o1, o2 := o[:plane], o[plane:2*plane], o[2*plane:3*plane]
	src = src[:3*plane]
	if width > 0 {
		for r := 0; r+width <= plane; r += width {
			row := src[3*r : 3*(r+width)]
			d0, d1, d2 := o0[r:r+width], o1[r:r+width], o2[r:r+width]
			for x, j := 0, len(row)-3; j >= 0; x, j = x+1, j-3 {
				s := row[j : j+3 : j+3]
				d0[x], d1[x], d2[x] = l0[s[0]], l1[s[1]], l2[s[2]]
			}
		}
		return
	}
	for p := range o0 {
		s := src[3*p : 3*p+3 : 3*p+3]
		o0[p], o1[p], o2[p] = l0[s[0]], l1[s[1]], l2[s[2]]
	}
}

// chw3x16 is chw3x32 for 16-bit floats.
func chw3x16(out, src []byte, lut []uint32, plane, width int) {
	o := unsafe.Slice((*uint16)(unsafe.Pointer(&out[0])), 3*plane)
	var l [3][256]uint16
	for k := range l {
		for v := range l[k] {
			l[k][v] = uint16(lut[k*256+v])
		}
	}
	o0, o1, o2 := o[:plane], o[plane:2*plane], o[2*plane:3*plane]
	src = src[:3*plane]
	if width > 0 {
		for r := 0; r+width <= plane; r += width {
			row := src[3*r : 3*(r+width)]
			d0, d1, d2 := o0[r:r+width], o1[r:r+width], o2[r:r+width]
			for x, j := 0, len(row)-3; j >= 0; x, j = x+1, j-3 {
				s := row[j : j+3 : j+3]
				d0[x], d1[x], d2[x] = l[0][s[0]], l[1][s[1]], l[2][s[2]]
			}
		}
		return
	}
	for p := range o0 {
		s := src[3*p : 3*p+3 : 3*p+3]
		o0[p], o1[p], o2[p] = l[0][s[0]], l[1][s[1]], l[2][s[2]]
	}
}

// normalizeAny is normalize for any numeric dtype, value by value.
func (n *normalizer) normalizeAny(out []byte, t *tensor.Tensor, c, plane, size int) {
	nv := int(t.NumValues())
	for i := 0; i < nv; i++ {
		k := i % max(c, 1)
		m, s := n.mean[min(k, len(n.mean)-1)], n.std[min(k, len(n.std)-1)]
		j := i
		if n.chw {
			j = k*plane + i/c
		}
		put(out, size, j, encodeFloat(n.dtype, (t.Float64At(i)*n.scale-m)/s))
	}
}

// nativeLE reports a little-endian host, where a float32's bytes in a
// tensor (little-endian) are its bits in memory.
var nativeLE = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// encodeFloat is v's bits as a dtype of float32, bfloat16 or float16.
func encodeFloat(dtype tensor.DType, v float64) uint32 {
	switch dtype {
	case tensor.BFloat16:
		return uint32(tensor.Float32ToBFloat16(float32(v)))
	case tensor.Float16:
		return uint32(tensor.Float32ToFloat16(float32(v)))
	}
	return math.Float32bits(float32(v))
}

func put(out []byte, size, i int, bits uint32) {
	if size == 4 {
		binary.LittleEndian.PutUint32(out[4*i:], bits)
	} else {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(bits))
	}
}
