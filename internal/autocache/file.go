package autocache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/feedmesh/feedmesh/tensor"
)

// File format, version 2 (all integers little-endian):
//
//	header:  "FMAC" | version u8 = 2 | prefix length u8 | prefix | split i64 |
//	         source length u8 | source | crc32c u32 (of the header before it)
//	records: length u32 | crc32c u32 (of the payload) | payload
//	trailer: "FMAE" | records u64 | record bytes u64 | crc32c u32 (of the trailer before it)
//
// A record's payload is one element with its position in the split:
// index uvarint | tensors uvarint | per tensor: name length uvarint, name,
// dtype u8, dims uvarint, each dim uvarint, data length uvarint, data,
// offsets uvarint, each offset uvarint.
//
// The trailer is written last, so a file cut short has none, and its
// counts must agree with the file's size: truncation is found before a
// single element is served. A flipped bit inside a record fails its
// checksum when it is read (the reader stops there and reports
// ErrCorrupt; the elements before it were each checked).
//
// The source is what identified the split's input when its prefix output
// was computed (formats.SplitVersion: the files' sizes and modification
// times, an object's ETag; empty for sources the spec alone determines):
// a reader compares it with the input's now, and a cached split whose
// input changed is not served. Version 1 files (no source) are read as
// having an empty one.

const (
	fileVersion  = 2
	headerMagic  = "FMAC"
	trailerMagic = "FMAE"
	trailerSize  = 4 + 8 + 8 + 4
	// MaxRecordBytes bounds one record (one element of the prefix's
	// output) as the decoder reads it.
	MaxRecordBytes = 1 << 30
	maxTensors     = 1 << 12
	maxDims        = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is the error for a cache file that fails a check: a checksum,
// a count, a length, a field out of range. The store drops such a file.
var ErrCorrupt = errors.New("autocache: corrupt cache file")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Header identifies what a file caches: the prefix's output for a split,
// computed from the split's input as Source identifies it.
type Header struct {
	Prefix string
	Split  int64
	Source string
}

// Key is the entry the header names.
func (h Header) Key() Key { return Key{Prefix: h.Prefix, Split: h.Split} }

// MaxSourceBytes bounds Header.Source.
const MaxSourceBytes = 255

func encodeHeader(h Header) ([]byte, error) {
	if len(h.Prefix) == 0 || len(h.Prefix) > 255 {
		return nil, fmt.Errorf("autocache: prefix fingerprint of %d bytes (want 1..255)", len(h.Prefix))
	}
	if len(h.Source) > MaxSourceBytes {
		return nil, fmt.Errorf("autocache: source version of %d bytes (at most %d)", len(h.Source), MaxSourceBytes)
	}
	b := append([]byte(headerMagic), fileVersion, byte(len(h.Prefix)))
	b = append(b, h.Prefix...)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Split))
	b = append(b, byte(len(h.Source)))
	b = append(b, h.Source...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// Writer writes one cache file: records, then the trailer on Close.
type Writer struct {
	w       *bufio.Writer
	n       uint64 // records
	bytes   uint64 // record bytes
	scratch []byte
	err     error
}

// NewWriter writes h to w and returns a writer for the records.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	hb, err := encodeHeader(h)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := bw.Write(hb); err != nil {
		return nil, err
	}
	return &Writer{w: bw}, nil
}

// Add appends one element at position index of its split. It copies
// what it needs: el may change after Add returns.
func (w *Writer) Add(index int64, el tensor.Element) error {
	if w.err != nil {
		return w.err
	}
	if index < 0 {
		return fmt.Errorf("autocache: negative element index %d", index)
	}
	p := w.scratch[:0]
	p = binary.AppendUvarint(p, uint64(index))
	p = binary.AppendUvarint(p, uint64(len(el.Tensors)))
	for i := range el.Tensors {
		t := &el.Tensors[i]
		p = binary.AppendUvarint(p, uint64(len(t.Name)))
		p = append(p, t.Name...)
		p = append(p, byte(t.DType))
		p = binary.AppendUvarint(p, uint64(len(t.Shape)))
		for _, d := range t.Shape {
			p = binary.AppendUvarint(p, uint64(d))
		}
		p = binary.AppendUvarint(p, uint64(len(t.Data)))
		p = append(p, t.Data...)
		p = binary.AppendUvarint(p, uint64(len(t.Offsets)))
		for _, o := range t.Offsets {
			p = binary.AppendUvarint(p, uint64(o))
		}
	}
	w.scratch = p
	if len(p) > MaxRecordBytes {
		return fmt.Errorf("autocache: element of %d bytes, at most %d per element", len(p), MaxRecordBytes)
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(hdr[4:], crc32.Checksum(p, castagnoli))
	if _, err := w.w.Write(hdr[:]); err != nil {
		w.err = err
		return err
	}
	if _, err := w.w.Write(p); err != nil {
		w.err = err
		return err
	}
	w.n++
	w.bytes += uint64(8 + len(p))
	return nil
}

// Bytes is how many bytes the records written so far take.
func (w *Writer) Bytes() int64 { return int64(w.bytes) }

// Finish writes the trailer and flushes. The file is complete once the
// caller has also synced and closed it.
func (w *Writer) Finish() error {
	if w.err != nil {
		return w.err
	}
	t := []byte(trailerMagic)
	t = binary.LittleEndian.AppendUint64(t, w.n)
	t = binary.LittleEndian.AppendUint64(t, w.bytes)
	t = binary.LittleEndian.AppendUint32(t, crc32.Checksum(t, castagnoli))
	if _, err := w.w.Write(t); err != nil {
		return err
	}
	return w.w.Flush()
}

// Reader reads one cache file's elements in order. Open checks the header
// and the trailer; Next checks each record.
type Reader struct {
	Header  Header
	Records int64 // how many elements the file holds
	r       *bufio.Reader
	left    uint64 // record bytes not yet read
	read    int64
	buf     []byte
}

// OpenReader checks the header and trailer of the size bytes at ra and
// returns a reader of its records (read through wrap(records) when wrap is
// not nil: a throttled view, say).
func OpenReader(ra io.ReaderAt, size int64, wrap func(io.Reader) io.Reader) (*Reader, error) {
	if size < int64(len(headerMagic)+2+8+4+trailerSize) {
		return nil, corrupt("%d bytes: too short for a header and a trailer", size)
	}
	var fixed [6]byte
	if _, err := ra.ReadAt(fixed[:], 0); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if string(fixed[:4]) != headerMagic {
		return nil, corrupt("not a cache file (magic %q)", fixed[:4])
	}
	version := fixed[4]
	if version != 1 && version != fileVersion {
		return nil, corrupt("format version %d, this build reads 1 and %d", version, fileVersion)
	}
	plen := int64(fixed[5])
	slen := int64(0) // version 1: no source
	if version >= 2 && size > 6+plen+8 {
		var sl [1]byte
		if _, err := ra.ReadAt(sl[:], 6+plen+8); err != nil {
			return nil, fmt.Errorf("read header: %w", err)
		}
		slen = 1 + int64(sl[0])
	}
	hlen := 6 + plen + 8 + slen + 4
	if plen == 0 || size < hlen+trailerSize {
		return nil, corrupt("header of %d bytes in a file of %d", hlen, size)
	}
	hb := make([]byte, hlen)
	if _, err := ra.ReadAt(hb, 0); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if crc32.Checksum(hb[:hlen-4], castagnoli) != binary.LittleEndian.Uint32(hb[hlen-4:]) {
		return nil, corrupt("header checksum mismatch")
	}
	h := Header{Prefix: string(hb[6 : 6+plen]), Split: int64(binary.LittleEndian.Uint64(hb[6+plen:]))}
	if slen > 0 {
		h.Source = string(hb[6+plen+8+1 : 6+plen+8+slen])
	}
	var tb [trailerSize]byte
	if _, err := ra.ReadAt(tb[:], size-trailerSize); err != nil {
		return nil, fmt.Errorf("read trailer: %w", err)
	}
	if string(tb[:4]) != trailerMagic || crc32.Checksum(tb[:trailerSize-4], castagnoli) != binary.LittleEndian.Uint32(tb[trailerSize-4:]) {
		return nil, corrupt("no valid trailer (file truncated or overwritten)")
	}
	n := binary.LittleEndian.Uint64(tb[4:])
	body := binary.LittleEndian.Uint64(tb[12:])
	if body != uint64(size-hlen-trailerSize) {
		return nil, corrupt("trailer says %d record bytes, the file has %d", body, size-hlen-trailerSize)
	}
	if n > body/8 {
		return nil, corrupt("trailer says %d records in %d bytes", n, body)
	}
	var src io.Reader = io.NewSectionReader(ra, hlen, int64(body))
	if wrap != nil {
		src = wrap(src)
	}
	return &Reader{Header: h, Records: int64(n), r: bufio.NewReaderSize(src, 256<<10), left: body}, nil
}

// Next returns the next element and its index, io.EOF after the last, or
// an error wrapping ErrCorrupt.
func (r *Reader) Next() (int64, tensor.Element, error) {
	if r.read == r.Records {
		if r.left != 0 {
			return 0, tensor.Element{}, corrupt("%d bytes after the last record", r.left)
		}
		return 0, tensor.Element{}, io.EOF
	}
	var hdr [8]byte
	if r.left < 8 {
		return 0, tensor.Element{}, corrupt("record %d: file ends in its header", r.read)
	}
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		return 0, tensor.Element{}, readErr(r.read, err)
	}
	n := uint64(binary.LittleEndian.Uint32(hdr[:4]))
	if n > r.left-8 || n > MaxRecordBytes {
		return 0, tensor.Element{}, corrupt("record %d: length %d, %d bytes left", r.read, n, r.left-8)
	}
	if uint64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	p := r.buf[:n]
	if _, err := io.ReadFull(r.r, p); err != nil {
		return 0, tensor.Element{}, readErr(r.read, err)
	}
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
		return 0, tensor.Element{}, corrupt("record %d: checksum mismatch", r.read)
	}
	r.left -= 8 + n
	idx, el, err := decodeRecord(p)
	if err != nil {
		return 0, tensor.Element{}, corrupt("record %d: %v", r.read, err)
	}
	r.read++
	return idx, el, nil
}

func readErr(rec int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("record %d: file ends early", rec)
	}
	return fmt.Errorf("autocache: read record %d: %w", rec, err)
}

// decodeRecord decodes one payload; the element's buffers are fresh
// copies (p is reused).
func decodeRecord(p []byte) (int64, tensor.Element, error) {
	d := decoder{p: p}
	idx := d.uvarint()
	nt := d.uvarint()
	if d.err == nil && (idx > math.MaxInt64 || nt > maxTensors) {
		return 0, tensor.Element{}, fmt.Errorf("index %d, %d tensors", idx, nt)
	}
	el := tensor.Element{Tensors: make([]tensor.Tensor, 0, min(nt, 64))}
	for i := uint64(0); i < nt && d.err == nil; i++ {
		var t tensor.Tensor
		t.Name = string(d.bytes(d.uvarint()))
		t.DType = tensor.DType(d.byte())
		nd := d.uvarint()
		if nd > maxDims {
			return 0, tensor.Element{}, fmt.Errorf("tensor %d: %d dims", i, nd)
		}
		if nd > 0 {
			t.Shape = make([]int64, nd)
			for j := range t.Shape {
				v := d.uvarint()
				if v > math.MaxInt32 {
					return 0, tensor.Element{}, fmt.Errorf("tensor %d: dimension %d", i, v)
				}
				t.Shape[j] = int64(v)
			}
		}
		t.Data = append([]byte{}, d.bytes(d.uvarint())...)
		no := d.uvarint()
		if no > uint64(len(p)) {
			return 0, tensor.Element{}, fmt.Errorf("tensor %d: %d offsets", i, no)
		}
		if no > 0 {
			t.Offsets = make([]int64, no)
			for j := range t.Offsets {
				v := d.uvarint()
				if v > math.MaxInt32*64 {
					return 0, tensor.Element{}, fmt.Errorf("tensor %d: offset %d", i, v)
				}
				t.Offsets[j] = int64(v)
			}
		}
		if d.err == nil {
			if !shapeFits(t.Shape, int64(len(p))) {
				return 0, tensor.Element{}, fmt.Errorf("tensor %d: shape %v does not fit a record of %d bytes", i, t.Shape, len(p))
			}
			if err := t.Validate(); err != nil {
				return 0, tensor.Element{}, err
			}
		}
		el.Tensors = append(el.Tensors, t)
	}
	if d.err != nil {
		return 0, tensor.Element{}, d.err
	}
	if len(d.p) != 0 {
		return 0, tensor.Element{}, fmt.Errorf("%d bytes after the element", len(d.p))
	}
	return int64(idx), el, nil
}

type decoder struct {
	p   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.p) == 0 {
		d.err = errors.New("record ends early")
		return 0
	}
	b := d.p[0]
	d.p = d.p[1:]
	return b
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.err = fmt.Errorf("field of %d bytes, %d left", n, len(d.p))
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

// shapeFits reports whether the shape's product stays at most 8×limit+1
// without overflowing: no tensor in a record of limit bytes holds more
// values (bool and uint8 take a byte each; bytes entries an offset).
func shapeFits(shape []int64, limit int64) bool {
	n := int64(1)
	for _, d := range shape {
		if d == 0 {
			return true
		}
		if n > (8*limit+1)/d {
			return false
		}
		n *= d
	}
	return true
}
