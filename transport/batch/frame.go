package batch

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/fxamacker/cbor/v2"
)

// segAlign is the alignment of every tail segment (see the package comment).
const segAlign = 8

// zeros backs the padding segments of every frame; it is never written.
var zeros [segAlign]byte

// hostLittleEndian is true where []int64 offsets already are their wire bytes.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Frame is an encoded batch ready to send: the encoded CBOR header and the
// list of tail segments, which reference the tensors' buffers. A Frame is
// immutable: it can be written to many streams, also concurrently, and the
// tensors it was encoded from, and the Header's slices (Prov, Extra),
// must not change while it is in use (its tail references the tensors'
// bytes, and its compressed variants are built from the tail and the
// header when first needed).
type Frame struct {
	codec   *transport.Codec
	m       wireMsg // the header, for Compressed to re-encode
	hdr     cbor.RawMessage
	tail    [][]byte
	tailLen int64
	z       [numCompressions]lazyFrame // Compressed's variants, by Compression
}

// Encode encodes h and e as one batch frame without copying tensor bytes
// (on big-endian hosts the offsets tables of Bytes tensors are converted).
// h.Tensors is ignored: the metadata comes from e. Every tensor must pass
// tensor.Validate, names must be valid UTF-8 and distinct, and the frame must
// fit the codec's header and frame bounds (else the error wraps
// transport.ErrFrameTooLarge).
func Encode(codec *transport.Codec, h Header, e tensor.Element) (*Frame, error) {
	return EncodeWith(codec, h, e, EncodeOptions{})
}

// EncodeWith is Encode with options.
func EncodeWith(codec *transport.Codec, h Header, e tensor.Element, o EncodeOptions) (*Frame, error) {
	m := wireMsg{
		Kind:    kindBatch,
		Seq:     h.Seq,
		Worker:  h.Worker,
		Epoch:   h.Epoch,
		Prov:    flatProv(h.Prov),
		Extra:   h.Extra,
		Tensors: make([]TensorMeta, len(e.Tensors)),
	}
	if err := checkProv(h.Prov); err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	f := &Frame{codec: codec, tail: make([][]byte, 0, 2*len(e.Tensors))}
	for i := range e.Tensors {
		t := &e.Tensors[i]
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("encode batch: %w", err)
		}
		if !utf8.ValidString(t.Name) {
			return nil, fmt.Errorf("encode batch: tensor %d: name %q is not valid UTF-8", i, t.Name)
		}
		for j := range i {
			if e.Tensors[j].Name == t.Name {
				return nil, fmt.Errorf("encode batch: tensor name %q appears twice", t.Name)
			}
		}
		m.Tensors[i] = TensorMeta{Name: t.Name, DType: t.DType, Shape: t.Shape, DataBytes: int64(len(t.Data))}
		if o.Unpadded {
			if rows, pad, ok := unpaddedRows(e, t); ok {
				m.Tensors[i].Lengths, m.Tensors[i].PadBits = tensor.LengthsName(t.Name), pad
				if w, vals := narrowRows(t.DType, rows, o.Narrow); w != 0 {
					m.Tensors[i].Narrow = w
					f.appendSeg(vals)
					m.Tensors[i].DataBytes = int64(len(vals))
					continue
				}
				m.Tensors[i].DataBytes = f.appendRows(rows)
				continue
			}
		}
		f.appendSeg(t.Data)
		if t.DType == tensor.Bytes {
			m.Tensors[i].NumOffsets = int64(len(t.Offsets))
			f.appendSeg(offsetBytes(t.Offsets))
		}
	}
	hb, err := codec.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	if len(hb) > codec.MaxHeaderBytes() {
		return nil, fmt.Errorf("%w: encode batch: header is %d bytes, limit %d", transport.ErrFrameTooLarge, len(hb), codec.MaxHeaderBytes())
	}
	if int64(len(hb))+f.tailLen > codec.MaxFrameBytes() {
		return nil, fmt.Errorf("%w: encode batch: %d header + %d tail bytes, limit %d", transport.ErrFrameTooLarge, len(hb), f.tailLen, codec.MaxFrameBytes())
	}
	f.hdr, f.m = hb, m
	return f, nil
}

// appendSeg appends b to the tail, preceded by the zero padding that aligns it.
// Empty segments take no padding.
func (f *Frame) appendSeg(b []byte) {
	if len(b) == 0 {
		return
	}
	if pad := padTo(f.tailLen); pad > 0 {
		f.tail = append(f.tail, zeros[:pad])
		f.tailLen += pad
	}
	f.tail = append(f.tail, b)
	f.tailLen += int64(len(b))
}

// padTo is the padding that brings pos to the next multiple of segAlign.
func padTo(pos int64) int64 { return (segAlign - pos%segAlign) % segAlign }

// offsetBytes returns the little-endian wire bytes of an offsets table: a view
// on little-endian hosts, a converted copy elsewhere.
func offsetBytes(offs []int64) []byte {
	if len(offs) == 0 {
		return nil
	}
	if hostLittleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(offs))), 8*len(offs))
	}
	b := make([]byte, 8*len(offs))
	for i, o := range offs {
		for k := range 8 {
			b[8*i+k] = byte(uint64(o) >> (8 * k))
		}
	}
	return b
}

// Size returns the encoded header plus tail bytes (the transport adds a
// fixed prefix of a few bytes).
func (f *Frame) Size() int64 { return int64(len(f.hdr)) + f.tailLen }

// WriteTo writes the frame to w and returns the bytes written, prefix
// included. Small pieces (prefix, header, padding, small tensors) are
// coalesced so a frame of many small tensors costs few writes; large tensors
// are written straight from their buffers. It does not modify f.
func (f *Frame) WriteTo(w io.Writer) (int64, error) {
	cw := coalescer{w: w}
	if f.tailLen > 0 {
		bp := coalescePool.Get().(*[]byte)
		cw.buf = (*bp)[:0]
		defer coalescePool.Put(bp)
	}
	err := f.codec.WriteFrame(&cw, f.hdr, f.tail...)
	if err == nil {
		err = cw.flush()
	}
	if err != nil {
		return cw.n, fmt.Errorf("write batch frame: %w", err)
	}
	return cw.n, nil
}

// writeFrames writes fs to w back to back, gathering their small pieces
// (headers, small tails) into one pooled 64 KiB buffer so that a run of
// small frames reaches w in few writes.
func writeFrames(w io.Writer, fs []*Frame) error {
	if len(fs) == 1 {
		_, err := fs[0].WriteTo(w)
		return err
	}
	bp := coalescePool.Get().(*[]byte)
	defer coalescePool.Put(bp)
	cw := coalescer{w: w, buf: (*bp)[:0]}
	for _, f := range fs {
		if err := f.codec.WriteFrame(&cw, f.hdr, f.tail...); err != nil {
			return fmt.Errorf("write batch frame: %w", err)
		}
	}
	if err := cw.flush(); err != nil {
		return fmt.Errorf("write batch frame: %w", err)
	}
	return nil
}

// smallWrite is the largest piece WriteTo copies into its coalescing buffer
// instead of writing it on its own.
const smallWrite = 16 << 10

// coalesceBytes is the size of the pooled coalescing buffer.
const coalesceBytes = 64 << 10

var coalescePool = sync.Pool{New: func() any {
	b := make([]byte, 0, coalesceBytes)
	return &b
}}

// coalescer gathers small writes into buf and passes large ones through,
// counting the bytes that reached w. With a nil buf it only counts.
type coalescer struct {
	w   io.Writer
	buf []byte
	n   int64
}

func (c *coalescer) Write(p []byte) (int, error) {
	if cap(c.buf) > 0 && len(p) <= smallWrite {
		if len(c.buf)+len(p) > cap(c.buf) {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flush(); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *coalescer) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	n, err := c.w.Write(c.buf)
	c.n += int64(n)
	c.buf = c.buf[:0]
	return err
}
