package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// This file holds constructors and typed views shared by sources, built-in
// functions and ops. Constructors copy typed Go values into little-endian
// raw bytes; views (Int32s, Float32s, …) return the values without copying
// when the host is little-endian and Data is suitably aligned, and a copy
// otherwise, so callers must treat a view as read-only unless they own Data.

// hostLittleEndian is true on the hosts (amd64, arm64, …) where a raw
// little-endian buffer can be viewed as a typed slice directly.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// ScalarInt64 returns an int64 scalar tensor.
func ScalarInt64(name string, v int64) Tensor {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return Tensor{Name: name, DType: Int64, Data: b}
}

// ScalarInt32 returns an int32 scalar tensor.
func ScalarInt32(name string, v int32) Tensor {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, uint32(v))
	return Tensor{Name: name, DType: Int32, Data: b}
}

// ScalarFloat32 returns a float32 scalar tensor.
func ScalarFloat32(name string, v float32) Tensor {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, math.Float32bits(v))
	return Tensor{Name: name, DType: Float32, Data: b}
}

// ScalarFloat64 returns a float64 scalar tensor.
func ScalarFloat64(name string, v float64) Tensor {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	return Tensor{Name: name, DType: Float64, Data: b}
}

// ScalarBool returns a bool scalar tensor (one byte, 0 or 1).
func ScalarBool(name string, v bool) Tensor {
	b := []byte{0}
	if v {
		b[0] = 1
	}
	return Tensor{Name: name, DType: Bool, Data: b}
}

// BytesScalar returns a bytes scalar holding b. It does not copy b: the
// tensor aliases the caller's slice.
func BytesScalar(name string, b []byte) Tensor {
	return Tensor{Name: name, DType: Bytes, Data: b, Offsets: []int64{0, int64(len(b))}}
}

// BytesVector returns a bytes tensor of shape [len(entries)], copying the
// entries into one contiguous buffer.
func BytesVector(name string, entries [][]byte) Tensor {
	n := 0
	for _, e := range entries {
		n += len(e)
	}
	data := make([]byte, 0, n)
	offs := make([]int64, 1, len(entries)+1)
	for _, e := range entries {
		data = append(data, e...)
		offs = append(offs, int64(len(data)))
	}
	return Tensor{Name: name, DType: Bytes, Shape: []int64{int64(len(entries))}, Data: data, Offsets: offs}
}

// FromUint8s returns a uint8 tensor of the given shape holding a copy of v.
// A nil shape means a 1-D tensor of len(v) values.
func FromUint8s(name string, shape []int64, v []uint8) (Tensor, error) {
	shape, err := checkShape(name, shape, len(v))
	if err != nil {
		return Tensor{}, err
	}
	return Tensor{Name: name, DType: Uint8, Shape: shape, Data: append([]byte(nil), v...)}, nil
}

// FromInt32s returns an int32 tensor of the given shape holding v. A nil
// shape means a 1-D tensor of len(v) values.
func FromInt32s(name string, shape []int64, v []int32) (Tensor, error) {
	shape, err := checkShape(name, shape, len(v))
	if err != nil {
		return Tensor{}, err
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return Tensor{Name: name, DType: Int32, Shape: shape, Data: b}, nil
}

// FromInt64s returns an int64 tensor of the given shape holding v. A nil
// shape means a 1-D tensor of len(v) values.
func FromInt64s(name string, shape []int64, v []int64) (Tensor, error) {
	shape, err := checkShape(name, shape, len(v))
	if err != nil {
		return Tensor{}, err
	}
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return Tensor{Name: name, DType: Int64, Shape: shape, Data: b}, nil
}

// FromFloat32s returns a float32 tensor of the given shape holding v. A nil
// shape means a 1-D tensor of len(v) values.
func FromFloat32s(name string, shape []int64, v []float32) (Tensor, error) {
	shape, err := checkShape(name, shape, len(v))
	if err != nil {
		return Tensor{}, err
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: Float32, Shape: shape, Data: b}, nil
}

// FromFloat64s returns a float64 tensor of the given shape holding v. A nil
// shape means a 1-D tensor of len(v) values.
func FromFloat64s(name string, shape []int64, v []float64) (Tensor, error) {
	shape, err := checkShape(name, shape, len(v))
	if err != nil {
		return Tensor{}, err
	}
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return Tensor{Name: name, DType: Float64, Shape: shape, Data: b}, nil
}

func checkShape(name string, shape []int64, n int) ([]int64, error) {
	if shape == nil {
		return []int64{int64(n)}, nil
	}
	p := int64(1)
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("tensor %q: negative dimension in shape %v", name, shape)
		}
		p *= d
	}
	if p != int64(n) {
		return nil, fmt.Errorf("tensor %q: shape %v holds %d values, got %d", name, shape, p, n)
	}
	return append([]int64(nil), shape...), nil
}

// Uint8s returns the values of a uint8 (or bool, or int8 reinterpreted)
// tensor. It is always a view of Data.
func (t *Tensor) Uint8s() ([]uint8, error) {
	if t.DType != Uint8 && t.DType != Bool {
		return nil, t.dtypeErr(Uint8)
	}
	return t.Data, nil
}

// Int32s returns the values of an int32 tensor, a view of Data where the
// host allows it (see the file comment), else a copy.
func (t *Tensor) Int32s() ([]int32, error) {
	if t.DType != Int32 {
		return nil, t.dtypeErr(Int32)
	}
	return view[int32](t.Data, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }), nil
}

// Int64s returns the values of an int64 tensor (a view where possible).
func (t *Tensor) Int64s() ([]int64, error) {
	if t.DType != Int64 {
		return nil, t.dtypeErr(Int64)
	}
	return view[int64](t.Data, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }), nil
}

// Float32s returns the values of a float32 tensor (a view where possible).
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DType != Float32 {
		return nil, t.dtypeErr(Float32)
	}
	return view[float32](t.Data, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }), nil
}

// Float64s returns the values of a float64 tensor (a view where possible).
func (t *Tensor) Float64s() ([]float64, error) {
	if t.DType != Float64 {
		return nil, t.dtypeErr(Float64)
	}
	return view[float64](t.Data, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }), nil
}

func (t *Tensor) dtypeErr(want DType) error {
	return fmt.Errorf("tensor %q: dtype is %s, want %s", t.Name, t.DType, want)
}

func view[T any](data []byte, size int, dec func([]byte) T) []T {
	n := len(data) / size
	if n == 0 {
		return nil
	}
	if hostLittleEndian && uintptr(unsafe.Pointer(&data[0]))%uintptr(size) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&data[0])), n)
	}
	out := make([]T, n)
	for i := range out {
		out[i] = dec(data[i*size:])
	}
	return out
}

// Int64Value returns the value of an integer scalar (or one-value) tensor of
// any integer or bool dtype.
func (t *Tensor) Int64Value() (int64, error) {
	if t.DType == Bytes || t.NumValues() != 1 {
		return 0, fmt.Errorf("tensor %q: want a single numeric value, have %s%v", t.Name, t.DType, t.Shape)
	}
	if err := t.Validate(); err != nil {
		return 0, err
	}
	switch t.DType {
	case Uint8, Bool:
		return int64(t.Data[0]), nil
	case Int8:
		return int64(int8(t.Data[0])), nil
	case Int32:
		return int64(int32(binary.LittleEndian.Uint32(t.Data))), nil
	case Int64:
		return int64(binary.LittleEndian.Uint64(t.Data)), nil
	}
	return 0, fmt.Errorf("tensor %q: want an integer, have %s", t.Name, t.DType)
}

// Len is the length of the tensor's first dimension; for a scalar it is the
// number of bytes of a bytes scalar and 1 otherwise. It is the "length" that
// length filters and bucket_by_sequence_length use.
func (t *Tensor) Len() int64 {
	if len(t.Shape) > 0 {
		return t.Shape[0]
	}
	if t.DType == Bytes && len(t.Offsets) == 2 {
		return t.Offsets[1] - t.Offsets[0]
	}
	return 1
}

// Set replaces the tensor named t.Name, or appends t if there is none, so
// map functions can write an output tensor without disturbing the order of
// the others.
func (e *Element) Set(t Tensor) {
	for i := range e.Tensors {
		if e.Tensors[i].Name == t.Name {
			e.Tensors[i] = t
			return
		}
	}
	e.Tensors = append(e.Tensors, t)
}

// Clone returns a deep copy of the element (new shapes, data and offsets).
func (e *Element) Clone() Element {
	out := Element{Tensors: make([]Tensor, len(e.Tensors))}
	for i, t := range e.Tensors {
		out.Tensors[i] = Tensor{
			Name:    t.Name,
			DType:   t.DType,
			Shape:   append([]int64(nil), t.Shape...),
			Data:    append([]byte(nil), t.Data...),
			Offsets: append([]int64(nil), t.Offsets...),
		}
	}
	return out
}
