package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Float32ToFloat16 converts f to IEEE 754 half precision (round to nearest
// even; overflow gives ±Inf, NaN stays NaN).
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127+15 >= 0x1f: // overflow
		return sign | 0x7c00
	case exp-127+15 <= 0: // subnormal or zero in half precision
		if exp-127+15 < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - (exp - 127 + 15))
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp-127+15)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, which is the right rounding
	}
	return sign | uint16(h)
}

// Float16ToFloat32 converts an IEEE 754 half-precision value to float32.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / 1024 / 16384 // mant * 2^-24
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToBFloat16 converts f to bfloat16 (the top 16 bits of a float32,
// rounded to nearest even; NaN stays NaN).
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BFloat16ToFloat32 converts a bfloat16 value to float32.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float64At returns value i of a numeric or bool tensor as a float64.
// It does not check bounds beyond what slicing does; call Validate first on
// untrusted tensors.
func (t *Tensor) Float64At(i int) float64 {
	d := t.Data
	switch t.DType {
	case Uint8, Bool:
		return float64(d[i])
	case Int8:
		return float64(int8(d[i]))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(d[4*i:])))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(d[8*i:])))
	case Float16:
		return float64(Float16ToFloat32(binary.LittleEndian.Uint16(d[2*i:])))
	case BFloat16:
		return float64(BFloat16ToFloat32(binary.LittleEndian.Uint16(d[2*i:])))
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
	}
	return 0
}

// putFloat64 stores v as value i of a buffer of dtype dt, converting like a
// C cast for integers (truncation toward zero, saturating at the type's
// range; NaN becomes 0) and a comparison with zero for bool.
func putFloat64(dst []byte, dt DType, i int, v float64) {
	switch dt {
	case Uint8:
		dst[i] = uint8(saturate(v, 0, math.MaxUint8))
	case Int8:
		dst[i] = uint8(int8(saturate(v, math.MinInt8, math.MaxInt8)))
	case Bool:
		if v != 0 && !math.IsNaN(v) {
			dst[i] = 1
		} else {
			dst[i] = 0
		}
	case Int32:
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(int32(saturate(v, math.MinInt32, math.MaxInt32))))
	case Int64:
		binary.LittleEndian.PutUint64(dst[8*i:], uint64(saturateInt64(v)))
	case Float16:
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToFloat16(float32(v)))
	case BFloat16:
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBFloat16(float32(v)))
	case Float32:
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(dst[8*i:], math.Float64bits(v))
	}
}

func saturate(v, lo, hi float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return math.Trunc(v)
}

func saturateInt64(v float64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v <= math.MinInt64:
		return math.MinInt64
	case v >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(v)
}

// Cast converts a numeric or bool tensor to another numeric or bool dtype,
// keeping name and shape. Integers convert exactly between integer dtypes
// (saturating at the target's range); floats truncate toward zero when cast
// to integers; NaN casts to 0. Bytes tensors cannot be cast.
func Cast(t Tensor, to DType) (Tensor, error) {
	if !to.Valid() || to == Bytes {
		return Tensor{}, fmt.Errorf("tensor %q: cannot cast to %s", t.Name, to)
	}
	if t.DType == Bytes {
		return Tensor{}, fmt.Errorf("tensor %q: cannot cast a bytes tensor to %s", t.Name, to)
	}
	if err := t.Validate(); err != nil {
		return Tensor{}, err
	}
	out := Tensor{Name: t.Name, DType: to, Shape: append([]int64(nil), t.Shape...)}
	if t.DType == to {
		out.Data = append([]byte(nil), t.Data...)
		return out, nil
	}
	n := int(t.NumValues())
	out.Data = make([]byte, n*to.Size())
	if t.DType == Int64 && (to == Int32 || to == Int8 || to == Uint8) {
		// Through float64 would lose precision above 2^53; saturate directly.
		for i := 0; i < n; i++ {
			v := int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			putFloat64(out.Data, to, i, float64(clampInt(v, to)))
		}
		return out, nil
	}
	for i := 0; i < n; i++ {
		if t.DType == Int64 && to == Bool {
			if binary.LittleEndian.Uint64(t.Data[8*i:]) != 0 {
				out.Data[i] = 1
			}
			continue
		}
		putFloat64(out.Data, to, i, t.Float64At(i))
	}
	return out, nil
}

func clampInt(v int64, to DType) int64 {
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	switch to {
	case Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case Uint8:
		lo, hi = 0, math.MaxUint8
	}
	return max(lo, min(hi, v))
}

// PutFloat64 stores v as value i of a raw buffer of dtype dt (numeric or
// bool), converting as Cast does. dst must hold at least i+1 values.
func PutFloat64(dst []byte, dt DType, i int, v float64) { putFloat64(dst, dt, i, v) }

// PutInt64 stores the integer v as value i of a raw buffer of dtype dt,
// exactly for integer dtypes (saturating at their range) and as Cast does
// for the others. dst must hold at least i+1 values.
func PutInt64(dst []byte, dt DType, i int, v int64) {
	switch dt {
	case Int64:
		binary.LittleEndian.PutUint64(dst[8*i:], uint64(v))
	case Int32, Int8, Uint8:
		putFloat64(dst, dt, i, float64(clampInt(v, dt)))
	case Bool:
		dst[i] = 0
		if v != 0 {
			dst[i] = 1
		}
	default:
		putFloat64(dst, dt, i, float64(v))
	}
}
