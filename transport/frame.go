package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// Frame sentinels; returned errors wrap them with context.
var (
	// ErrFrameTooLarge reports a frame whose announced header or total length
	// exceeds the codec's bounds. Nothing was allocated for it.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrMalformedFrame reports a frame that is truncated, has an unknown version
	// or a header that is not valid, bounded CBOR.
	ErrMalformedFrame = errors.New("malformed frame")
)

// Frame layout: a fixed prefix, the CBOR header, the raw tail.
//
//	byte 0      frameVersion
//	bytes 1..4  header length, uint32 big-endian, 1..MaxHeaderBytes
//	bytes 5..12 tail length, uint64 big-endian
//
// Fixed widths keep the prefix readable with one io.ReadFull and without a
// buffered reader that would read past the frame.
const (
	frameVersion = 1
	prefixLen    = 13
	// cborMaxNesting bounds CBOR nesting; headers and RPC bodies are shallow.
	cborMaxNesting = 16
)

// MaxCBORElements bounds the elements of one CBOR array or map the codec
// decodes (a HeaderDecoder must refuse more). The data itself is bounded by
// the frame limits; this bounds the work per container.
const MaxCBORElements = 1 << 20

// Codec writes and reads frames (CBOR header + raw byte tail) with hardened CBOR
// modes and length bounds checked before any allocation. It is safe for
// concurrent use.
type Codec struct {
	maxHeader int
	maxFrame  int64
	enc       cbor.EncMode
	dec       cbor.DecMode
	hdrPool   sync.Pool // *[]byte, header scratch buffers
}

// NewCodec returns a codec bounding headers to maxHeaderBytes and header plus
// tail to maxFrameBytes (use Config.MaxHeaderBytes and Config.MaxFrameBytes).
func NewCodec(maxHeaderBytes int, maxFrameBytes int64) (*Codec, error) {
	if maxHeaderBytes < 16 || maxHeaderBytes > maxHeaderLimit {
		return nil, fmt.Errorf("codec: maxHeaderBytes %d out of range [16, %d]", maxHeaderBytes, maxHeaderLimit)
	}
	if maxFrameBytes < int64(maxHeaderBytes) {
		return nil, fmt.Errorf("codec: maxFrameBytes %d below maxHeaderBytes %d", maxFrameBytes, maxHeaderBytes)
	}
	dec, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		MaxNestedLevels:  cborMaxNesting,
		MaxArrayElements: MaxCBORElements,
		MaxMapPairs:      MaxCBORElements,
		UTF8:             cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		return nil, fmt.Errorf("codec: cbor decode mode: %w", err)
	}
	enc, err := cbor.EncOptions{
		Sort:        cbor.SortCoreDeterministic,
		IndefLength: cbor.IndefLengthForbidden,
	}.EncMode()
	if err != nil {
		return nil, fmt.Errorf("codec: cbor encode mode: %w", err)
	}
	return &Codec{maxHeader: maxHeaderBytes, maxFrame: maxFrameBytes, enc: enc, dec: dec}, nil
}

// WithMaxFrame returns a codec sharing c's CBOR modes with a frame bound of
// min(n, c.MaxFrameBytes()), e.g. to read small control requests.
func (c *Codec) WithMaxFrame(n int64) *Codec {
	n = max(min(n, c.maxFrame), int64(c.maxHeader))
	return &Codec{maxHeader: c.maxHeader, maxFrame: n, enc: c.enc, dec: c.dec}
}

// MaxHeaderBytes returns the header bound.
func (c *Codec) MaxHeaderBytes() int { return c.maxHeader }

// MaxFrameBytes returns the frame (header + tail) bound.
func (c *Codec) MaxFrameBytes() int64 { return c.maxFrame }

// Marshal encodes v as deterministic CBOR.
func (c *Codec) Marshal(v any) ([]byte, error) {
	b, err := c.enc.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cbor encode %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes CBOR with the hardened limits (nesting, container sizes,
// duplicate keys, no indefinite lengths). Errors wrap ErrMalformedFrame.
func (c *Codec) Unmarshal(b []byte, v any) error {
	if err := c.dec.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: cbor decode %T: %w", ErrMalformedFrame, v, err)
	}
	return nil
}

// WriteFrame writes one frame: header encoded as CBOR, then the tail buffers
// as they are (no copy into one buffer). It refuses frames over the bounds with
// ErrFrameTooLarge before writing anything.
func (c *Codec) WriteFrame(w io.Writer, header any, tail ...[]byte) error {
	hb, err := c.enc.Marshal(header)
	if err != nil {
		return fmt.Errorf("write frame: encode header %T: %w", header, err)
	}
	if len(hb) > c.maxHeader {
		return fmt.Errorf("%w: write frame: header is %d bytes, limit %d", ErrFrameTooLarge, len(hb), c.maxHeader)
	}
	var tailLen int64
	for _, t := range tail {
		tailLen += int64(len(t))
	}
	if int64(len(hb))+tailLen > c.maxFrame {
		return fmt.Errorf("%w: write frame: %d header + %d tail bytes, limit %d", ErrFrameTooLarge, len(hb), tailLen, c.maxFrame)
	}
	first := make([]byte, prefixLen+len(hb))
	first[0] = frameVersion
	binary.BigEndian.PutUint32(first[1:5], uint32(len(hb)))
	binary.BigEndian.PutUint64(first[5:13], uint64(tailLen))
	copy(first[prefixLen:], hb)
	if len(tail) == 0 {
		_, err = w.Write(first)
	} else {
		bufs := make(net.Buffers, 0, 1+len(tail))
		bufs = append(bufs, first)
		for _, t := range tail {
			if len(t) > 0 {
				bufs = append(bufs, t)
			}
		}
		_, err = bufs.WriteTo(w)
	}
	if err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// ReadFrame reads one frame, decodes its header into header (nil to only check
// it is well-formed) and returns the tail (nil when empty) in a new buffer.
// A clean end of stream before the frame returns io.EOF unwrapped.
func (c *Codec) ReadFrame(r io.Reader, header any) (tail []byte, err error) {
	return c.ReadFrameInto(r, header, nil)
}

// ReadFrameInto is ReadFrame with a caller-supplied tail buffer: alloc(n) is
// called once the header is decoded, with the exact tail length, and must return
// a slice with capacity at least n (a pooled or final tensor buffer); the tail is
// read into its first n bytes. alloc is not called for an empty tail. A nil alloc
// allocates.
func (c *Codec) ReadFrameInto(r io.Reader, header any, alloc func(n int) []byte) (tail []byte, err error) {
	tl, err := c.readHead(r, header)
	if err != nil || tl == 0 {
		return nil, err
	}
	n := int(tl)
	if alloc == nil {
		tail = make([]byte, n)
	} else {
		tail = alloc(n)
		if cap(tail) < n {
			return nil, fmt.Errorf("read frame: alloc returned %d bytes of capacity for a %d-byte tail", cap(tail), n)
		}
		tail = tail[:n]
	}
	if _, err := io.ReadFull(r, tail); err != nil {
		return nil, readErr("tail", err)
	}
	return tail, nil
}

// ReadFrameGrow is ReadFrame for peers that may lie about the tail length: it
// allocates the tail as its bytes arrive, never from the announced length. The
// first buffer holds up to first bytes; when it is full the buffer doubles (up
// to the tail length), and reserve(n) is called before each growth by n bytes
// (the caller's memory budget; its error aborts the read and is returned
// wrapped). The tail bytes read so far are then the only memory a stalled or
// truncated frame holds. reserve may be nil.
func (c *Codec) ReadFrameGrow(r io.Reader, header any, first int, reserve func(n int) error) ([]byte, error) {
	tl, err := c.readHead(r, header)
	if err != nil || tl == 0 {
		return nil, err
	}
	n := int(tl)
	buf := make([]byte, min(n, max(first, 1)))
	filled := 0
	for filled < n {
		if filled == len(buf) {
			grown := min(n, 2*len(buf))
			if reserve != nil {
				if err := reserve(grown - len(buf)); err != nil {
					return nil, fmt.Errorf("read frame tail: %w", err)
				}
			}
			nb := make([]byte, grown)
			copy(nb, buf)
			buf = nb
		}
		m, err := r.Read(buf[filled:])
		filled += m
		if err != nil && filled < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, readErr("tail", err)
		}
	}
	return buf, nil
}

// readHead reads a frame's prefix and header, checks the bounds and returns
// the tail length.
func (c *Codec) readHead(r io.Reader, header any) (uint64, error) {
	var prefix [prefixLen]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		if err == io.EOF {
			return 0, io.EOF
		}
		return 0, readErr("prefix", err)
	}
	if prefix[0] != frameVersion {
		return 0, fmt.Errorf("%w: unknown frame version %d", ErrMalformedFrame, prefix[0])
	}
	hl := binary.BigEndian.Uint32(prefix[1:5])
	tl := binary.BigEndian.Uint64(prefix[5:13])
	if hl == 0 {
		return 0, fmt.Errorf("%w: empty header", ErrMalformedFrame)
	}
	if uint64(hl) > uint64(c.maxHeader) {
		return 0, fmt.Errorf("%w: header of %d bytes, limit %d", ErrFrameTooLarge, hl, c.maxHeader)
	}
	if tl > uint64(c.maxFrame) || uint64(hl)+tl > uint64(c.maxFrame) {
		return 0, fmt.Errorf("%w: frame of %d header + %d tail bytes, limit %d", ErrFrameTooLarge, hl, tl, c.maxFrame)
	}
	if err := c.readHeader(r, int(hl), header); err != nil {
		return 0, err
	}
	return tl, nil
}

// readHeader reads and decodes a header of n bytes using a pooled scratch
// buffer: decoding copies everything out of it.
func (c *Codec) readHeader(r io.Reader, n int, header any) error {
	bp, _ := c.hdrPool.Get().(*[]byte)
	if bp == nil || cap(*bp) < n {
		b := make([]byte, n)
		bp = &b
	}
	defer c.hdrPool.Put(bp)
	hb := (*bp)[:n]
	if _, err := io.ReadFull(r, hb); err != nil {
		return readErr("header", err)
	}
	var err error
	if hd, ok := header.(HeaderDecoder); ok && hd.DecodeHeader(hb) {
		return nil
	}
	if header == nil {
		err = c.dec.Wellformed(hb)
	} else {
		err = c.dec.Unmarshal(hb, header)
	}
	if err != nil {
		return fmt.Errorf("%w: header: %w", ErrMalformedFrame, err)
	}
	return nil
}

// HeaderDecoder is implemented by a header type with a decoder of its own
// for its common form (a fast path). DecodeHeader reports whether it decoded
// b, which the codec reuses afterwards (so it must copy what it keeps); when
// it reports false it must have left the header unchanged, and the codec
// decodes b with its CBOR mode, which stays the judge of everything else.
// What DecodeHeader accepts, the CBOR mode must accept and decode the same.
type HeaderDecoder interface {
	DecodeHeader(b []byte) bool
}

func readErr(part string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		return fmt.Errorf("%w: truncated %s: %w", ErrMalformedFrame, part, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("read frame %s: %w", part, err)
}
