package batch

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
)

// LengthSuffix names the companion tensor of valid row lengths that padded
// batching (padded_batch, bucket_by_sequence_length) adds: "tokens" is padded
// along dimension 1 and "tokens_length" holds each row's real length.
const LengthSuffix = "_length"

// EncodeOptions tune EncodeWith.
type EncodeOptions struct {
	// Unpadded sends each padded tensor that has a "<name>_length" int32
	// [B] companion as its rows' valid prefixes only, and the receiver pads
	// them back: for heavy-tailed text the padding is most of the bytes
	// (tf.data service ships it). A tensor whose padding is not one uniform
	// value (so unpadding would lose data) is sent as it is.
	Unpadded bool
}

// unpaddedRows returns the valid prefix of each row of t and the padding
// value's bytes, if t can be sent unpadded without loss.
func unpaddedRows(e tensor.Element, t *tensor.Tensor) (rows [][]byte, pad []byte, ok bool) {
	size := t.DType.Size()
	if size == 0 || len(t.Shape) < 2 {
		return nil, nil, false
	}
	lt, found := e.Get(t.Name + LengthSuffix)
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

// checkUnpaddedMeta checks an unpadded tensor's metadata: a numeric tensor
// of rank >= 2 whose padded size is bounded and whose sent bytes are whole
// inner rows.
func checkUnpaddedMeta(t *TensorMeta, lim Limits, i int, values int64) error {
	size := int64(t.DType.Size())
	switch {
	case size == 0:
		return malformed("tensor %d (%q): %s tensor cannot be unpadded", i, t.Name, t.DType)
	case len(t.Shape) < 2:
		return malformed("tensor %d (%q): unpadded tensor of rank %d, want >= 2", i, t.Name, len(t.Shape))
	case t.Lengths == "" || int64(len(t.PadBits)) != size:
		return malformed("tensor %d (%q): unpadded tensor needs a lengths tensor and %d pad bytes", i, t.Name, size)
	case values > lim.MaxUnpaddedBytes/size:
		return malformed("tensor %d (%q): pads to %s%v, over the %d-byte limit", i, t.Name, t.DType, t.Shape, lim.MaxUnpaddedBytes)
	case t.DataBytes > values*size:
		return malformed("tensor %d (%q): %d bytes sent for a padded size of %d", i, t.Name, t.DataBytes, values*size)
	}
	return nil
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
	size := int64(t.DType.Size())
	b, l := t.Shape[0], t.Shape[1]
	stride := size
	for _, d := range t.Shape[2:] {
		stride *= d
	}
	var sent int64
	for r := int64(0); r < b; r++ {
		n := int64(int32(binary.LittleEndian.Uint32(lt.Data[4*r:])))
		if n < 0 || n > l {
			return malformed("tensor %d (%q): row %d has length %d, outside [0, %d]", i, t.Name, r, n, l)
		}
		if n > math.MaxInt64/stride || sent > math.MaxInt64-n*stride {
			return malformed("tensor %d (%q): lengths overflow", i, t.Name)
		}
		sent += n * stride
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
		n := int64(int32(binary.LittleEndian.Uint32(lt.Data[4*r:]))) * stride
		row := full[r*rowBytes : (r+1)*rowBytes]
		copy(row, t.Data[src:src+n])
		src += n
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
