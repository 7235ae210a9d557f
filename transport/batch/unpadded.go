package batch

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/feedmesh/feedmesh/tensor"
)

// EncodeOptions tune EncodeWith.
type EncodeOptions struct {
	// Unpadded sends each padded tensor that has a "<name>_length" int32
	// [B] companion as its rows' valid prefixes only, and the receiver pads
	// them back: for heavy-tailed text the padding is most of the bytes
	// (tf.data service ships it). A tensor whose padding is not one uniform
	// value (so unpadding would lose data) is sent as it is.
	Unpadded bool
	// Narrow (with Unpadded) sends an unpadded int32 or int64 tensor whose
	// values are all in [0, 2^8), [0, 2^16) (or for int64 [0, 2^32)) in 1,
	// 2 (or 4) bytes a value, and the receiver widens them back while it
	// re-pads: token ids of a vocabulary under 65,536 take half the bytes.
	// It costs the sender two passes over the values (find the width, copy).
	Narrow bool
}

// ShippedEncodeOptions are what a worker encodes its batches with by
// default (mesh.WorkerConfig.SendPadded turns them off).
var ShippedEncodeOptions = EncodeOptions{Unpadded: true, Narrow: true}

// unpaddedRows returns the valid prefix of each row of t and the padding
// value's bytes, if t can be sent unpadded without loss.
func unpaddedRows(e tensor.Element, t *tensor.Tensor) (rows [][]byte, pad []byte, ok bool) {
	size := t.DType.Size()
	if size == 0 || len(t.Shape) < 2 {
		return nil, nil, false
	}
	lt, found := e.Get(tensor.LengthsName(t.Name))
	if !found || lt.DType != tensor.Int32 || len(lt.Shape) != 1 || lt.Shape[0] != t.Shape[0] || len(lt.Data) != 4*int(lt.Shape[0]) {
		return nil, nil, false
	}
	b, l := t.Shape[0], t.Shape[1]
	stride := int64(size)
	for _, d := range t.Shape[2:] {
		stride *= d
	}
	rowBytes := l * stride
	rows = make([][]byte, 0, b)
	var pattern []byte // pad repeated over a whole row, built on first use
	for r := int64(0); r < b; r++ {
		n := int64(int32(binary.LittleEndian.Uint32(lt.Data[4*r:])))
		if n < 0 || n > l {
			return nil, nil, false
		}
		row := t.Data[r*rowBytes : (r+1)*rowBytes]
		rest := row[n*stride:]
		if len(rest) > 0 {
			if pad == nil {
				pad = rest[:size]
				pattern = bytes.Repeat(pad, int(rowBytes)/size)
			}
			if !bytes.Equal(rest, pattern[:len(rest)]) {
				return nil, nil, false
			}
		}
		rows = append(rows, row[:n*stride])
	}
	if pad == nil {
		return nil, nil, false // nothing to save: every row is full
	}
	return rows, append([]byte(nil), pad...), true
}

// appendRows appends rows back to back (aligned as one segment) and returns
// their total length.
func (f *Frame) appendRows(rows [][]byte) int64 {
	var n int64
	for _, r := range rows {
		if len(r) == 0 {
			continue
		}
		if n == 0 {
			if pad := padTo(f.tailLen); pad > 0 {
				f.tail = append(f.tail, zeros[:pad])
				f.tailLen += pad
			}
		}
		f.tail = append(f.tail, r)
		f.tailLen += int64(len(r))
		n += int64(len(r))
	}
	return n
}

// narrowRows returns the values of rows (of an int32 or int64 tensor) in
// the narrowest unsigned width that holds them all, and that width; 0 when
// not enabled or no width is narrower than dt's (negative values, large
// values, other dtypes, no values).
func narrowRows(dt tensor.DType, rows [][]byte, enabled bool) (uint8, []byte) {
	if !enabled || (dt != tensor.Int32 && dt != tensor.Int64) {
		return 0, nil
	}
	size := dt.Size()
	var bitsOr uint64 // the OR of all values: its width bounds theirs
	count := 0
	for _, r := range rows {
		count += len(r) / size
		if size == 4 {
			for off := 0; off+4 <= len(r); off += 4 {
				bitsOr |= uint64(int64(int32(binary.LittleEndian.Uint32(r[off:]))))
			}
		} else {
			for off := 0; off+8 <= len(r); off += 8 {
				bitsOr |= binary.LittleEndian.Uint64(r[off:])
			}
		}
	}
	var w int
	switch {
	case bitsOr < 1<<8:
		w = 1
	case bitsOr < 1<<16:
		w = 2
	case bitsOr < 1<<32:
		w = 4 // a negative int32 sign-extends past this
	default:
		return 0, nil
	}
	if w >= size || count == 0 {
		return 0, nil
	}
	// Little-endian: a value's low w bytes are its first w bytes.
	out := make([]byte, count*w)
	o := 0
	for _, r := range rows {
		for off := 0; off+size <= len(r); off += size {
			switch w {
			case 1:
				out[o] = r[off]
			case 2:
				out[o], out[o+1] = r[off], r[off+1]
			default:
				copy(out[o:o+w], r[off:off+w])
			}
			o += w
		}
	}
	return uint8(w), out
}

// widen writes the n-byte unsigned little-endian values of src as the
// size-byte values of dst (len(dst)/size of them).
func widen(dst, src []byte, n, size int64) {
	k := int64(len(dst)) / size
	if k == 0 {
		return
	}
	src = src[:k*n]
	if n == 2 && size == 4 {
		// The common case (token ids): four values a load, two stores,
		// walking the slices so the loop carries no index bounds checks.
		dst = dst[:4*k]
		for len(src) >= 16 && len(dst) >= 32 {
			x, y := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[8:])
			binary.LittleEndian.PutUint64(dst, x&0xffff|(x>>16&0xffff)<<32)
			binary.LittleEndian.PutUint64(dst[8:], x>>32&0xffff|(x>>48)<<32)
			binary.LittleEndian.PutUint64(dst[16:], y&0xffff|(y>>16&0xffff)<<32)
			binary.LittleEndian.PutUint64(dst[24:], y>>32&0xffff|(y>>48)<<32)
			src, dst = src[16:], dst[32:]
		}
		for len(src) >= 8 && len(dst) >= 16 {
			x := binary.LittleEndian.Uint64(src)
			binary.LittleEndian.PutUint64(dst, x&0xffff|(x>>16&0xffff)<<32)
			binary.LittleEndian.PutUint64(dst[8:], x>>32&0xffff|(x>>48)<<32)
			src, dst = src[8:], dst[16:]
		}
		for len(src) >= 2 && len(dst) >= 4 {
			binary.LittleEndian.PutUint32(dst, uint32(binary.LittleEndian.Uint16(src)))
			src, dst = src[2:], dst[4:]
		}
		return
	}
	if n == 1 && size == 4 {
		for j, v := range src {
			binary.LittleEndian.PutUint32(dst[4*j:], uint32(v))
		}
		return
	}
	for j := range k {
		var v uint64
		for b := range n {
			v |= uint64(src[j*n+b]) << (8 * b)
		}
		for b := range size {
			dst[j*size+b] = byte(v >> (8 * b))
		}
	}
}

// wireSize is the bytes a value of an unpadded tensor takes in the tail.
func (t *TensorMeta) wireSize() int64 {
	if t.Narrow != 0 {
		return int64(t.Narrow)
	}
	return int64(t.DType.Size())
}

// checkUnpaddedMeta checks an unpadded tensor's metadata: a numeric tensor
// of rank >= 2 whose padded size is bounded and whose sent bytes are whole
// inner rows.
func checkUnpaddedMeta(t *TensorMeta, lim Limits, i int, values int64) error {
	size := int64(t.DType.Size())
	switch {
	case t.Narrow != 0 && !validNarrow(t.DType, t.Narrow):
		return malformed("tensor %d (%q): %s values cannot be sent in %d bytes", i, t.Name, t.DType, t.Narrow)
	case size == 0:
		return malformed("tensor %d (%q): %s tensor cannot be unpadded", i, t.Name, t.DType)
	case len(t.Shape) < 2:
		return malformed("tensor %d (%q): unpadded tensor of rank %d, want >= 2", i, t.Name, len(t.Shape))
	case values == 0:
		// Nothing to pad (and a zero inner dimension would make the
		// receiver's row stride 0); an encoder never unpads it.
		return malformed("tensor %d (%q): unpadded tensor of shape %v holds no values", i, t.Name, t.Shape)
	case t.Lengths == "" || int64(len(t.PadBits)) != size:
		return malformed("tensor %d (%q): unpadded tensor needs a lengths tensor and %d pad bytes", i, t.Name, size)
	case values > lim.MaxUnpaddedBytes/size:
		return malformed("tensor %d (%q): pads to %s%v, over the %d-byte limit", i, t.Name, t.DType, t.Shape, lim.MaxUnpaddedBytes)
	case t.DataBytes > values*t.wireSize():
		return malformed("tensor %d (%q): %d bytes sent for a padded size of %d", i, t.Name, t.DataBytes, values*size)
	}
	return nil
}

// validNarrow reports whether values of dt may be sent in n bytes.
func validNarrow(dt tensor.DType, n uint8) bool {
	switch dt {
	case tensor.Int32:
		return n == 1 || n == 2
	case tensor.Int64:
		return n == 1 || n == 2 || n == 4
	}
	return false
}

// repad replaces tensor i's unpadded rows with the padded tensor, using the
// lengths tensor named in meta (checked here: int32 [B], 0 <= len <= L, and
// the lengths account for exactly the bytes sent).
func repad(e *tensor.Element, i int, meta *TensorMeta, alloc func(n int) []byte) error {
	t := &e.Tensors[i]
	lt, ok := e.Get(meta.Lengths)
	if !ok || lt.DType != tensor.Int32 || len(lt.Shape) != 1 || lt.Shape[0] != t.Shape[0] || len(lt.Data) != 4*int(lt.Shape[0]) {
		return malformed("tensor %d (%q): lengths tensor %q missing or not int32 [%d]", i, t.Name, meta.Lengths, t.Shape[0])
	}
	size, ws := int64(t.DType.Size()), meta.wireSize()
	b, l := t.Shape[0], t.Shape[1]
	stride, wstride := size, ws // bytes of one position along dim 1: padded, sent
	for _, d := range t.Shape[2:] {
		stride *= d
		wstride *= d
	}
	var sent int64
	for r := int64(0); r < b; r++ {
		n := int64(int32(binary.LittleEndian.Uint32(lt.Data[4*r:])))
		if n < 0 || n > l {
			return malformed("tensor %d (%q): row %d has length %d, outside [0, %d]", i, t.Name, r, n, l)
		}
		if n > math.MaxInt64/stride || sent > math.MaxInt64-n*wstride {
			return malformed("tensor %d (%q): lengths overflow", i, t.Name)
		}
		sent += n * wstride
	}
	if sent != int64(len(t.Data)) {
		return malformed("tensor %d (%q): lengths account for %d bytes, %d were sent", i, t.Name, sent, len(t.Data))
	}
	var full []byte
	fresh := alloc == nil // make zeroes; a recycled buffer holds old bytes
	if fresh {
		full = make([]byte, b*l*stride)
	} else {
		full = alloc(int(b * l * stride))
	}
	zeroPad := bytes.Count(meta.PadBits, []byte{0}) == len(meta.PadBits)
	rowBytes := l * stride
	var src int64
	for r := int64(0); r < b; r++ {
		k := int64(int32(binary.LittleEndian.Uint32(lt.Data[4*r:])))
		n := k * stride
		row := full[r*rowBytes : (r+1)*rowBytes]
		if ws == size {
			copy(row, t.Data[src:src+n])
		} else {
			widen(row[:n], t.Data[src:src+k*wstride], ws, size)
		}
		src += k * wstride
		if zeroPad {
			if !fresh {
				clear(row[n:])
			}
			continue // make() already zeroed it
		}
		for off := n; off < rowBytes; off += size {
			copy(row[off:off+size], meta.PadBits)
		}
	}
	t.Data = full
	return nil
}
