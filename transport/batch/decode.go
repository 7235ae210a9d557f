package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
)

// Decode reads one batch frame from r. It checks the header against lim and
// the codec's bounds, and the announced tail length against the tensor
// metadata (valid dtype, non-negative dims, product(shape)*size == DataBytes
// for fixed-size dtypes, NumOffsets == product(shape)+1 for Bytes), all before
// allocating anything for the tail. It then reads the tail into ONE buffer,
// alloc(n) (nil: make), and slices the tensors out of it without copying
// (a compressed tail is read into a buffer of its own first, then
// decompressed into alloc(n)):
// Data slices (capacity-limited) and, where the host is little-endian and the
// buffer 8-byte aligned, Offsets views; Bytes offsets must start at 0, be
// monotone and end at DataBytes. A clean end of stream before the frame
// returns io.EOF; every malformed input returns an error wrapping
// ErrMalformedBatch. The tensors' Shape slices are shared with the header's
// TensorMeta.
func Decode(codec *transport.Codec, r io.Reader, lim Limits, alloc func(n int) []byte) (Header, tensor.Element, error) {
	var m wireMsg
	e, err := readMsg(codec, r, &m, lim, bufs{tail: alloc, pad: alloc})
	if err != nil {
		return Header{}, tensor.Element{}, err
	}
	if m.Kind != kindBatch {
		return Header{}, tensor.Element{}, malformed("got a %s message, want a batch", m.Kind)
	}
	return m.header(), e, nil
}

// bufs says where readMsg puts what it reads. A nil field makes new
// (zeroed) buffers.
type bufs struct {
	tail func(n int) []byte // the tail, decompressed when it came compressed; called once a message
	pad  func(n int) []byte // each re-padded tensor; may return old bytes
	wire func(n int) []byte // a compressed tail as it arrives
}

// readMsg reads one message of any kind into m; for a batch it returns the
// decoded element. Non-batch messages must have an empty tail. A compressed
// tail is read into b.wire(n) and decompressed into b.tail(raw).
func readMsg(codec *transport.Codec, r io.Reader, m *wireMsg, lim Limits, b bufs) (tensor.Element, error) {
	lim = lim.withDefaults()
	mk := func(n int) []byte { return make([]byte, n) }
	tailAlloc, wire := b.tail, b.wire
	if tailAlloc == nil {
		tailAlloc = mk
	}
	if wire == nil {
		wire = mk
	}
	var (
		plan    []segment
		planErr error
		planned bool
		raw     int64 // the tail's length before compression
	)
	tail, err := codec.ReadFrameInto(r, m, func(n int) []byte {
		planned = true
		if raw, planErr = rawTailLen(m, int64(n), codec.MaxFrameBytes()); planErr == nil {
			plan, planErr = planTail(m, lim, raw)
		}
		if planErr != nil {
			return nil // makes ReadFrameInto fail; planErr is returned below
		}
		if m.Comp != CompressNone && m.Kind == kindBatch {
			return wire(n)
		}
		return tailAlloc(n)
	})
	if planErr != nil {
		return tensor.Element{}, planErr
	}
	if err != nil {
		if err == io.EOF {
			return tensor.Element{}, io.EOF
		}
		if errors.Is(err, transport.ErrMalformedFrame) || errors.Is(err, transport.ErrFrameTooLarge) {
			return tensor.Element{}, malformed("%v", err)
		}
		return tensor.Element{}, err
	}
	if !planned {
		if raw, err = rawTailLen(m, 0, codec.MaxFrameBytes()); err != nil {
			return tensor.Element{}, err
		}
		if plan, err = planTail(m, lim, raw); err != nil {
			return tensor.Element{}, err
		}
	}
	if m.Kind != kindBatch {
		return tensor.Element{}, nil
	}
	if m.Comp != CompressNone {
		buf := tailAlloc(int(raw))
		if int64(cap(buf)) < raw {
			return tensor.Element{}, fmt.Errorf("decode batch: alloc returned %d bytes of capacity for a %d-byte tail", cap(buf), raw)
		}
		if err := decompressTail(m.Comp, tail, buf[:raw]); err != nil {
			return tensor.Element{}, err
		}
		tail = buf[:raw]
	}
	return sliceTail(m, plan, tail, b.pad)
}

// rawTailLen returns the length of a batch's tail before compression: n
// for an uncompressed tail of n bytes, the header's RawTail, checked
// against maxRaw, for a compressed one. Other kinds keep n.
func rawTailLen(m *wireMsg, n, maxRaw int64) (int64, error) {
	if m.Kind != kindBatch {
		return n, nil
	}
	switch {
	case m.Comp == CompressNone && m.RawTail != 0:
		return 0, malformed("uncompressed tail with a length before compression (%d)", m.RawTail)
	case m.Comp == CompressNone:
		return n, nil
	case !m.Comp.Valid():
		return 0, malformed("tail compressed with unknown %v", m.Comp)
	case n == 0:
		return 0, malformed("%v-compressed batch with an empty tail", m.Comp)
	case m.RawTail < 1 || m.RawTail > maxRaw:
		return 0, malformed("%v-compressed tail of %d bytes before compression, limit %d", m.Comp, m.RawTail, maxRaw)
	}
	return m.RawTail, nil
}

// segment locates one tensor's bytes in the tail.
type segment struct {
	data, offs int64 // start of the data and of the offsets table
}

// planTail checks a decoded header against the limits and computes where each
// tensor lies in a tail of n bytes. It does not look at the tail.
func planTail(m *wireMsg, lim Limits, n int64) ([]segment, error) {
	switch m.Kind {
	case kindBatch:
	case kindOpen, kindCredit, kindEnd, kindAccept:
		if n != 0 {
			return nil, malformed("%s message with a %d-byte tail", m.Kind, n)
		}
		return nil, nil
	default:
		return nil, malformed("unknown message kind %d", uint8(m.Kind))
	}
	if len(m.Tensors) > lim.MaxTensors {
		return nil, malformed("%d tensors, limit %d", len(m.Tensors), lim.MaxTensors)
	}
	if err := checkWireProv(m.Prov, lim); err != nil {
		return nil, err
	}
	plan := make([]segment, len(m.Tensors))
	var pos int64
	// take reserves size bytes (aligned) at pos and returns their start.
	take := func(size int64, what string, i int) (int64, error) {
		if size == 0 {
			return pos, nil
		}
		start := pos + padTo(pos)
		if start > n || size > n-start {
			return 0, malformed("tensor %d (%q): %s of %d bytes at %d overruns the %d-byte tail", i, m.Tensors[i].Name, what, size, start, n)
		}
		pos = start + size
		return start, nil
	}
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if err := checkMeta(t, lim, i); err != nil {
			return nil, err
		}
		for j := range i {
			if m.Tensors[j].Name == t.Name {
				return nil, malformed("tensor name %q appears twice", t.Name)
			}
		}
		var err error
		if plan[i].data, err = take(t.DataBytes, "data", i); err != nil {
			return nil, err
		}
		if plan[i].offs, err = take(8*t.NumOffsets, "offsets", i); err != nil {
			return nil, err
		}
	}
	if pos != n {
		return nil, malformed("tensors take %d bytes but the tail has %d", pos, n)
	}
	return plan, nil
}

// checkMeta checks one tensor's metadata for consistency, with overflow-safe
// arithmetic. On success 8*NumOffsets does not overflow.
func checkMeta(t *TensorMeta, lim Limits, i int) error {
	if len(t.Name) > lim.MaxNameBytes {
		return malformed("tensor %d: name of %d bytes, limit %d", i, len(t.Name), lim.MaxNameBytes)
	}
	if !t.DType.Valid() {
		return malformed("tensor %d (%q): invalid dtype %d", i, t.Name, uint8(t.DType))
	}
	if len(t.Shape) > lim.MaxDims {
		return malformed("tensor %d (%q): %d dims, limit %d", i, t.Name, len(t.Shape), lim.MaxDims)
	}
	if t.DataBytes < 0 || t.NumOffsets < 0 {
		return malformed("tensor %d (%q): negative byte count", i, t.Name)
	}
	values, err := numValues(t.Shape)
	if err != nil {
		return malformed("tensor %d (%q): %v", i, t.Name, err)
	}
	if t.Lengths != "" || t.PadBits != nil {
		if t.NumOffsets != 0 {
			return malformed("tensor %d (%q): unpadded tensor with offsets", i, t.Name)
		}
		return checkUnpaddedMeta(t, lim, i, values)
	}
	if t.Narrow != 0 {
		return malformed("tensor %d (%q): narrowed values in a tensor that is not unpadded", i, t.Name)
	}
	if t.DType == tensor.Bytes {
		if values == math.MaxInt64 || t.NumOffsets != values+1 {
			return malformed("tensor %d (%q): bytes tensor of shape %v has %d offsets, want product(shape)+1", i, t.Name, t.Shape, t.NumOffsets)
		}
		if t.NumOffsets > math.MaxInt64/8 {
			return malformed("tensor %d (%q): %d offsets overflow", i, t.Name, t.NumOffsets)
		}
		return nil
	}
	if t.NumOffsets != 0 {
		return malformed("tensor %d (%q): %s tensor with %d offsets", i, t.Name, t.DType, t.NumOffsets)
	}
	size := int64(t.DType.Size())
	if values > math.MaxInt64/size || values*size != t.DataBytes {
		return malformed("tensor %d (%q): %s%v needs %d values of %d bytes, header says %d bytes", i, t.Name, t.DType, t.Shape, values, size, t.DataBytes)
	}
	return nil
}

// numValues is product(shape), rejecting negative dims and int64 overflow.
func numValues(shape []int64) (int64, error) {
	p := int64(1)
	zero := false
	for _, d := range shape {
		if d < 0 {
			return 0, errors.New("negative dimension")
		}
		if d == 0 {
			zero = true
		}
	}
	if zero {
		return 0, nil
	}
	for _, d := range shape {
		if p > math.MaxInt64/d {
			return 0, errors.New("shape product overflows int64")
		}
		p *= d
	}
	return p, nil
}

// sliceTail builds the element from a checked plan: tensors are slices of
// tail, padding must be zero, Bytes offsets must be valid.
func sliceTail(m *wireMsg, plan []segment, tail []byte, pad func(n int) []byte) (tensor.Element, error) {
	e := tensor.Element{Tensors: make([]tensor.Tensor, len(m.Tensors))}
	var pos int64
	checkPad := func(start int64) error {
		for _, b := range tail[pos:start] {
			if b != 0 {
				return malformed("non-zero padding at tail byte %d", pos)
			}
		}
		return nil
	}
	for i := range m.Tensors {
		meta := &m.Tensors[i]
		t := &e.Tensors[i]
		t.Name, t.DType, t.Shape = meta.Name, meta.DType, meta.Shape
		if meta.DataBytes > 0 {
			s := plan[i].data
			if err := checkPad(s); err != nil {
				return tensor.Element{}, err
			}
			t.Data = tail[s : s+meta.DataBytes : s+meta.DataBytes]
			pos = s + meta.DataBytes
		}
		if meta.NumOffsets > 0 {
			s := plan[i].offs
			if err := checkPad(s); err != nil {
				return tensor.Element{}, err
			}
			pos = s + 8*meta.NumOffsets
			t.Offsets = offsetsView(tail[s:pos])
			if err := checkOffsets(t.Offsets, meta.DataBytes); err != nil {
				return tensor.Element{}, malformed("tensor %d (%q): %v", i, t.Name, err)
			}
		}
	}
	for i := range m.Tensors {
		if m.Tensors[i].Lengths != "" {
			if err := repad(&e, i, &m.Tensors[i], pad); err != nil {
				return tensor.Element{}, err
			}
		}
	}
	return e, nil
}

// offsetsView returns b as []int64 without copying where the host is
// little-endian and b is aligned, else a decoded copy.
func offsetsView(b []byte) []int64 {
	n := len(b) / 8
	if hostLittleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 {
		return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func checkOffsets(offs []int64, dataBytes int64) error {
	prev := int64(0)
	for i, o := range offs {
		if (i == 0 && o != 0) || o < prev || o > dataBytes {
			return fmt.Errorf("offset %d at entry %d is not monotone within the %d data bytes", o, i, dataBytes)
		}
		prev = o
	}
	if prev != dataBytes {
		return errors.New("offsets end before the end of the data")
	}
	return nil
}
