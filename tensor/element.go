package tensor

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor. The numeric values are part of the
// wire format and of dataset fingerprints: never renumber them.
type DType uint8

const (
	Uint8 DType = iota + 1
	Int8
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	Bool
	// Bytes tensors hold one variable-length byte string per entry (raw
	// records, text, encoded images). See Tensor.Offsets.
	Bytes
)

var dtypeNames = [...]string{
	Uint8: "uint8", Int8: "int8", Int32: "int32", Int64: "int64",
	Float16: "float16", BFloat16: "bfloat16", Float32: "float32",
	Float64: "float64", Bool: "bool", Bytes: "bytes",
}

// String returns the dtype's name as written in specs ("int32", "bytes", …).
func (d DType) String() string {
	if int(d) < len(dtypeNames) && dtypeNames[d] != "" {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Valid reports whether d is one of the defined dtypes.
func (d DType) Valid() bool { return d >= Uint8 && d <= Bytes }

// Size is the width in bytes of one value, or 0 for Bytes (variable length).
func (d DType) Size() int {
	switch d {
	case Uint8, Int8, Bool:
		return 1
	case Float16, BFloat16:
		return 2
	case Int32, Float32:
		return 4
	case Int64, Float64:
		return 8
	}
	return 0
}

// ParseDType parses a dtype name as written in specs.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n != "" && n == strings.ToLower(s) {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of uint8, int8, int32, int64, float16, bfloat16, float32, float64, bool, bytes)", s)
}

// Tensor is one named, typed, shaped array. Values are stored as
// little-endian raw bytes in row-major order so they can be sent without
// per-value boxing.
type Tensor struct {
	Name  string
	DType DType
	// Shape of the tensor; nil or empty for a scalar.
	Shape []int64
	// Data holds the raw values. For Bytes tensors it is the concatenation
	// of all entries.
	Data []byte
	// Offsets is used only by Bytes tensors: it has NumValues()+1 entries and
	// entry i is Data[Offsets[i]:Offsets[i+1]]. Offsets[0] is 0.
	Offsets []int64
}

// NumValues is the product of the shape (1 for a scalar).
func (t *Tensor) NumValues() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// ByteSize is the number of payload bytes the tensor carries (values plus,
// for Bytes tensors, the offsets table).
func (t *Tensor) ByteSize() int {
	return len(t.Data) + 8*len(t.Offsets)
}

// Entry returns the i-th byte string of a Bytes tensor.
func (t *Tensor) Entry(i int) []byte {
	return t.Data[t.Offsets[i]:t.Offsets[i+1]]
}

// Validate checks that the tensor's dtype, shape and buffers agree.
func (t *Tensor) Validate() error {
	if !t.DType.Valid() {
		return fmt.Errorf("tensor %q: invalid dtype %d", t.Name, uint8(t.DType))
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension in shape %v", t.Name, t.Shape)
		}
	}
	n := t.NumValues()
	if t.DType == Bytes {
		if int64(len(t.Offsets)) != n+1 {
			return fmt.Errorf("tensor %q: bytes tensor of %d values has %d offsets, want %d", t.Name, n, len(t.Offsets), n+1)
		}
		prev := int64(0)
		for i, o := range t.Offsets {
			if (i == 0 && o != 0) || o < prev || o > int64(len(t.Data)) {
				return fmt.Errorf("tensor %q: bad offset %d at %d", t.Name, o, i)
			}
			prev = o
		}
		if prev != int64(len(t.Data)) {
			return fmt.Errorf("tensor %q: offsets end at %d but data has %d bytes", t.Name, prev, len(t.Data))
		}
		return nil
	}
	if want := n * int64(t.DType.Size()); int64(len(t.Data)) != want {
		return fmt.Errorf("tensor %q: %s%v needs %d bytes, has %d", t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}

// Element is an ordered set of named tensors. A batch is an element whose
// tensors have a leading batch dimension.
type Element struct {
	Tensors []Tensor
}

// Get returns the tensor with the given name.
func (e *Element) Get(name string) (*Tensor, bool) {
	for i := range e.Tensors {
		if e.Tensors[i].Name == name {
			return &e.Tensors[i], true
		}
	}
	return nil, false
}

// Empty returns a batch of e's tensors (names, types, trailing dimensions)
// with no rows: a filler that keeps a batch's shape.
func (e *Element) Empty() Element {
	var out Element
	for _, t := range e.Tensors {
		shape := append([]int64(nil), t.Shape...)
		if len(shape) > 0 {
			shape[0] = 0
		}
		z := Tensor{Name: t.Name, DType: t.DType, Shape: shape, Data: []byte{}}
		if t.DType == Bytes {
			z.Offsets = []int64{0}
		}
		out.Tensors = append(out.Tensors, z)
	}
	return out
}

// ByteSize is the total payload of all tensors.
func (e *Element) ByteSize() int {
	n := 0
	for i := range e.Tensors {
		n += e.Tensors[i].ByteSize()
	}
	return n
}
