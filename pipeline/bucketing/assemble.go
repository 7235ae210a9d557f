package bucketing

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/feedmesh/feedmesh/tensor"
)

// PadOptions controls Pad.
type PadOptions struct {
	// PadValue fills the padding of numeric tensors, converted to each
	// tensor's dtype (truncated for integers, != 0 for bool). Bytes tensors
	// are padded with empty entries.
	PadValue float64
	// Lengths names the tensors for which an int32 [batch] tensor
	// "<name>_length" holding each element's length (tensor.Len) before
	// padding is appended to the batch.
	Lengths []string
}

// Stack assembles a batch from elements that all have the same tensors
// (names, order, dtypes and shapes). Numeric tensors are stacked along a new
// leading dimension; bytes tensors are concatenated with shifted offsets. A
// shape mismatch is an error that points to padded batching.
func Stack(elems []tensor.Element) (tensor.Element, error) {
	return assemble(elems, false, PadOptions{}, nil)
}

// StackInto is Stack with each numeric tensor's buffer from alloc(n): an
// empty slice of capacity n at least, which Stack fills.
func StackInto(elems []tensor.Element, alloc func(n int) []byte) (tensor.Element, error) {
	return assemble(elems, false, PadOptions{}, alloc)
}

// Pad assembles a batch like Stack, but tensors whose shapes differ within
// the batch (same rank) are padded in every dimension to the largest size in
// the batch: numeric tensors with o.PadValue, bytes tensors with empty
// entries. It then appends the length tensors o.Lengths asks for.
func Pad(elems []tensor.Element, o PadOptions) (tensor.Element, error) {
	return assemble(elems, true, o, nil)
}

func assemble(elems []tensor.Element, pad bool, o PadOptions, alloc func(int) []byte) (tensor.Element, error) {
	if len(elems) == 0 {
		return tensor.Element{}, fmt.Errorf("cannot assemble an empty batch")
	}
	first := elems[0].Tensors
	out := tensor.Element{Tensors: make([]tensor.Tensor, 0, len(first)+len(o.Lengths))}
	col := make([]*tensor.Tensor, len(elems))
	for j := range first {
		name := first[j].Name
		for i := range elems {
			t, err := column(&elems[i], j, name)
			if err != nil {
				return tensor.Element{}, fmt.Errorf("batch element %d: %w", i, err)
			}
			col[i] = t
		}
		t, err := assembleTensor(col, pad, o.PadValue, alloc)
		if err != nil {
			return tensor.Element{}, err
		}
		out.Tensors = append(out.Tensors, t)
	}
	for _, name := range o.Lengths {
		lt, err := lengths(elems, name)
		if err != nil {
			return tensor.Element{}, err
		}
		if _, dup := out.Get(lt.Name); dup {
			return tensor.Element{}, fmt.Errorf("tensor %q: cannot add lengths, the element already has a tensor of that name", lt.Name)
		}
		out.Tensors = append(out.Tensors, lt)
	}
	return out, nil
}

// column returns tensor j of e, which must be named name (every element of a
// batch has the same tensors in the same order).
func column(e *tensor.Element, j int, name string) (*tensor.Tensor, error) {
	if j < len(e.Tensors) && e.Tensors[j].Name == name {
		return &e.Tensors[j], nil
	}
	if t, ok := e.Get(name); ok {
		return t, fmt.Errorf("tensor %q is at a different position than in the first element; all elements of a batch need the same tensors in the same order", t.Name)
	}
	return nil, fmt.Errorf("has no tensor %q; all elements of a batch need the same tensors", name)
}

func lengths(elems []tensor.Element, name string) (tensor.Tensor, error) {
	data := make([]byte, 4*len(elems))
	for i := range elems {
		t, ok := elems[i].Get(name)
		if !ok {
			return tensor.Tensor{}, fmt.Errorf("batch element %d: no tensor %q to measure", i, name)
		}
		n := t.Len()
		if n > math.MaxInt32 {
			return tensor.Tensor{}, fmt.Errorf("tensor %q: length %d does not fit int32", name, n)
		}
		binary.LittleEndian.PutUint32(data[4*i:], uint32(int32(n)))
	}
	return tensor.Tensor{Name: tensor.LengthsName(name), DType: tensor.Int32, Shape: []int64{int64(len(elems))}, Data: data}, nil
}

func assembleTensor(col []*tensor.Tensor, pad bool, padValue float64, alloc func(int) []byte) (tensor.Tensor, error) {
	t0 := col[0]
	same := true
	for i, t := range col {
		if t.DType != t0.DType {
			return tensor.Tensor{}, fmt.Errorf("tensor %q: dtype %s in batch element %d, %s in element 0", t.Name, t.DType, i, t0.DType)
		}
		if len(t.Shape) != len(t0.Shape) {
			return tensor.Tensor{}, fmt.Errorf("tensor %q: rank %d in batch element %d, %d in element 0", t.Name, len(t.Shape), i, len(t0.Shape))
		}
		if err := checkBuffers(t); err != nil {
			return tensor.Tensor{}, fmt.Errorf("batch element %d: %w", i, err)
		}
		if same && !equalShape(t.Shape, t0.Shape) {
			same = false
		}
	}
	if !same && !pad {
		for i, t := range col {
			if !equalShape(t.Shape, t0.Shape) {
				return tensor.Tensor{}, fmt.Errorf("tensor %q: shape %v in batch element %d, %v in element 0; use padded_batch or bucket_by_sequence_length for variable-length tensors", t.Name, t.Shape, i, t0.Shape)
			}
		}
	}
	n := int64(len(col))
	if same {
		shape := append([]int64{n}, t0.Shape...)
		if t0.DType == tensor.Bytes {
			return stackBytes(col, shape), nil
		}
		size := 0
		for _, t := range col {
			size += len(t.Data)
		}
		var data []byte
		if alloc != nil {
			data = alloc(size)[:0]
		} else {
			data = make([]byte, 0, size)
		}
		for _, t := range col {
			data = append(data, t.Data...)
		}
		return tensor.Tensor{Name: t0.Name, DType: t0.DType, Shape: shape, Data: data}, nil
	}
	maxShape := append([]int64(nil), t0.Shape...)
	for _, t := range col {
		for d, s := range t.Shape {
			maxShape[d] = max(maxShape[d], s)
		}
	}
	shape := append([]int64{n}, maxShape...)
	if t0.DType == tensor.Bytes {
		return padBytes(col, shape, maxShape)
	}
	return padNumeric(col, shape, maxShape, padValue), nil
}

// checkBuffers verifies the cheap invariants assembly relies on, so a
// malformed tensor from a user function is an error, not a panic.
func checkBuffers(t *tensor.Tensor) error {
	if t.DType == tensor.Bytes {
		if int64(len(t.Offsets)) != t.NumValues()+1 || t.Offsets[0] != 0 || t.Offsets[len(t.Offsets)-1] != int64(len(t.Data)) {
			return t.Validate()
		}
		return nil
	}
	if !t.DType.Valid() || int64(len(t.Data)) != t.NumValues()*int64(t.DType.Size()) {
		return t.Validate()
	}
	return nil
}

func equalShape(a, b []int64) bool {
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

func stackBytes(col []*tensor.Tensor, shape []int64) tensor.Tensor {
	size, nOff := 0, 1
	for _, t := range col {
		size += len(t.Data)
		nOff += len(t.Offsets) - 1
	}
	data := make([]byte, 0, size)
	offs := make([]int64, 1, nOff)
	for _, t := range col {
		base := int64(len(data))
		data = append(data, t.Data...)
		for _, o := range t.Offsets[1:] {
			offs = append(offs, base+o)
		}
	}
	return tensor.Tensor{Name: col[0].Name, DType: tensor.Bytes, Shape: shape, Data: data, Offsets: offs}
}

func product(shape []int64) int64 {
	p := int64(1)
	for _, d := range shape {
		p *= d
	}
	return p
}

// forEachRow calls f for every innermost row of a tensor of shape src placed
// in a row-major tensor of shape dst (same rank, dst >= src in every
// dimension), with the row's value index in src and in dst. A scalar is one
// row of one value.
func forEachRow(src, dst []int64, f func(srcIdx, dstIdx, n int64)) {
	if len(src) == 0 {
		f(0, 0, 1)
		return
	}
	last := len(src) - 1
	rowLen := src[last]
	rows := product(src[:last])
	if rows == 0 || rowLen == 0 {
		return
	}
	stride := make([]int64, len(dst))
	s := int64(1)
	for d := last; d >= 0; d-- {
		stride[d] = s
		s *= dst[d]
	}
	idx := make([]int64, last)
	for r := int64(0); r < rows; r++ {
		var off int64
		for d, i := range idx {
			off += i * stride[d]
		}
		f(r*rowLen, off, rowLen)
		for d := last - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < src[d] {
				break
			}
			idx[d] = 0
		}
	}
}

func padNumeric(col []*tensor.Tensor, shape, maxShape []int64, padValue float64) tensor.Tensor {
	size := int64(col[0].DType.Size())
	per := product(maxShape)
	data := make([]byte, int64(len(col))*per*size)
	if pat := PadPattern(col[0].DType, padValue); !allZero(pat) {
		for i := 0; i < len(data); i += len(pat) {
			copy(data[i:], pat)
		}
	}
	for i, t := range col {
		base := int64(i) * per * size
		forEachRow(t.Shape, maxShape, func(si, di, n int64) {
			copy(data[base+di*size:base+(di+n)*size], t.Data[si*size:(si+n)*size])
		})
	}
	return tensor.Tensor{Name: col[0].Name, DType: col[0].DType, Shape: shape, Data: data}
}

func padBytes(col []*tensor.Tensor, shape, maxShape []int64) (tensor.Tensor, error) {
	per := product(maxShape)
	entries := make([][]byte, int64(len(col))*per)
	for i, t := range col {
		if err := t.Validate(); err != nil {
			return tensor.Tensor{}, err
		}
		base := int64(i) * per
		forEachRow(t.Shape, maxShape, func(si, di, n int64) {
			for k := int64(0); k < n; k++ {
				entries[base+di+k] = t.Entry(int(si + k))
			}
		})
	}
	bt := tensor.BytesVector(col[0].Name, entries)
	bt.Shape = shape
	return bt, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// PadPattern returns the little-endian encoding of v as one value of dtype
// dt: truncated toward zero and saturated for integers, != 0 for bool,
// rounded for floating point. It returns nil for bytes.
func PadPattern(dt tensor.DType, v float64) []byte {
	b := make([]byte, dt.Size())
	sat := func(lo, hi float64) float64 {
		if math.IsNaN(v) {
			return 0
		}
		return math.Trunc(math.Max(lo, math.Min(hi, v)))
	}
	switch dt {
	case tensor.Uint8:
		b[0] = uint8(sat(0, math.MaxUint8))
	case tensor.Int8:
		b[0] = uint8(int8(sat(math.MinInt8, math.MaxInt8)))
	case tensor.Bool:
		if v != 0 && !math.IsNaN(v) {
			b[0] = 1
		}
	case tensor.Int32:
		binary.LittleEndian.PutUint32(b, uint32(int32(sat(math.MinInt32, math.MaxInt32))))
	case tensor.Int64:
		x := sat(math.MinInt64, math.MaxInt64)
		var i int64
		switch {
		case x >= math.MaxInt64:
			i = math.MaxInt64
		case x <= math.MinInt64:
			i = math.MinInt64
		default:
			i = int64(x)
		}
		binary.LittleEndian.PutUint64(b, uint64(i))
	case tensor.Float16:
		binary.LittleEndian.PutUint16(b, tensor.Float32ToFloat16(float32(v)))
	case tensor.BFloat16:
		binary.LittleEndian.PutUint16(b, tensor.Float32ToBFloat16(float32(v)))
	case tensor.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case tensor.Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	default:
		return nil
	}
	return b
}
