package formats

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/feedmesh/feedmesh/tensor"
)

// TFRecord framing, as TensorFlow writes it:
//
//	uint64 length (little-endian)
//	uint32 masked CRC32C of the 8 length bytes
//	length bytes of data
//	uint32 masked CRC32C of the data
//
// where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
const tfrecordOverhead = 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC32C is the CRC32C (Castagnoli) of b, masked as TFRecord does so
// that CRCs of data containing CRCs stay well distributed.
func MaskedCRC32C(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// WriteTFRecord writes one record with its framing to w.
func WriteTFRecord(w io.Writer, record []byte) error {
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(record)))
	binary.LittleEndian.PutUint32(hdr[8:], MaskedCRC32C(hdr[:8]))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(record); err != nil {
		return err
	}
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], MaskedCRC32C(record))
	_, err := w.Write(tail[:])
	return err
}

// headerAt decodes a record header; ok is false when its CRC fails.
func headerAt(hdr []byte) (length uint64, ok bool) {
	length = binary.LittleEndian.Uint64(hdr[:8])
	return length, binary.LittleEndian.Uint32(hdr[8:12]) == MaskedCRC32C(hdr[:8])
}

// tfrecordBoundaries walks the record headers and cuts the file into
// ranges of at least splitBytes at record starts. A corrupt header stops
// the walk: the rest of the file is the last split, whose reader reports
// (or skips) the corruption.
func tfrecordBoundaries(f io.ReaderAt, size, splitBytes, maxRecord int64) ([]int64, error) {
	bounds := []int64{0}
	w := window{f: f, size: size}
	next := splitBytes
	for pos := int64(0); pos < size; {
		hdr, err := w.at(pos, 12)
		if err != nil || len(hdr) < 12 {
			break
		}
		length, ok := headerAt(hdr)
		if !ok || length > uint64(size-pos-tfrecordOverhead) || int64(length) > maxRecord {
			break
		}
		pos += tfrecordOverhead + int64(length)
		if pos >= next && pos < size {
			bounds = append(bounds, pos)
			next = pos + splitBytes
		}
	}
	return bounds, nil
}

// window reads a file through a 64 KiB window so that walking headers
// reads small records sequentially and seeks over large ones.
type window struct {
	f    io.ReaderAt
	size int64
	buf  []byte
	off  int64
}

// at returns up to n bytes at pos (fewer only at the end of the file).
func (w *window) at(pos int64, n int) ([]byte, error) {
	if pos >= w.off && pos+int64(n) <= w.off+int64(len(w.buf)) {
		return w.buf[pos-w.off : pos-w.off+int64(n)], nil
	}
	if w.buf == nil {
		w.buf = make([]byte, readBufferBytes)
	}
	w.buf = w.buf[:cap(w.buf)]
	k, err := w.f.ReadAt(w.buf[:min(int64(len(w.buf)), w.size-pos)], pos)
	w.buf, w.off = w.buf[:k], pos
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return w.buf[:min(k, n)], nil
}

// tfrecordIter reads the records starting in the split's range.
type tfrecordIter struct {
	fr      *fileRange
	skip    bool
	max     int64
	r       *bufio.Reader
	pos     int64
	skipped int64
	slab    slab
	done    bool
}

func newTFRecordIter(fr *fileRange, o FilesOptions) (Iterator, error) {
	it := &tfrecordIter{fr: fr, skip: o.SkipCorrupt, max: o.MaxRecordBytes}
	it.seek(fr.start)
	return it, nil
}

func (it *tfrecordIter) seek(pos int64) {
	it.pos = pos
	it.r = bufio.NewReaderSize(io.NewSectionReader(it.fr.f, pos, it.fr.size-pos), readBufferBytes)
}

// Skipped is the number of corrupt or truncated records skipped so far
// (SkipCorrupt mode). A run of bytes resynchronised over counts once.
func (it *tfrecordIter) Skipped() int64 { return it.skipped }

func (it *tfrecordIter) recErr(off int64, sentinel error, format string, args ...any) error {
	return &RecordError{Path: it.fr.path, Offset: off, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

func (it *tfrecordIter) Next(ctx context.Context) (tensor.Element, error) {
	for {
		if err := ctx.Err(); err != nil {
			return tensor.Element{}, err
		}
		if it.done || it.pos >= it.fr.end {
			return tensor.Element{}, io.EOF
		}
		rec, err := it.read()
		if err == nil {
			return tensor.Element{Tensors: []tensor.Tensor{tensor.BytesScalar("record", rec)}}, nil
		}
		if !it.skip || !(errors.Is(err, ErrCorruptRecord) || errors.Is(err, ErrTruncatedRecord)) {
			it.done = true
			return tensor.Element{}, err
		}
		it.skipped++
	}
}

// read reads the record at it.pos. After a length CRC mismatch in skip mode
// it resynchronises to the next valid header.
func (it *tfrecordIter) read() ([]byte, error) {
	start := it.pos
	var hdr [12]byte
	n, err := io.ReadFull(it.r, hdr[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		it.done = true
		return nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		it.done = true
		return nil, it.recErr(start, ErrTruncatedRecord, "truncated record (file ends %d bytes into the 12-byte header)", n)
	case err != nil:
		it.done = true
		return nil, fmt.Errorf("read %s: %w", it.fr.path, err)
	}
	length, ok := headerAt(hdr[:])
	if !ok {
		err := it.recErr(start, ErrCorruptRecord, "corrupt record (length CRC mismatch)")
		if it.skip {
			it.resync(start + 1)
		}
		return nil, err
	}
	remain := it.fr.size - start - tfrecordOverhead
	if length > uint64(max(remain, 0)) {
		it.done = true
		return nil, it.recErr(start, ErrTruncatedRecord, "truncated record (length %d, but only %d bytes follow the header)", length, max(remain+4, 0))
	}
	if int64(length) > it.max {
		it.done = true
		return nil, it.recErr(start, ErrRecordTooLarge, "record of %d bytes exceeds max_record_bytes (%d)", length, it.max)
	}
	var data []byte
	if length <= slabBytes/4 {
		data = it.slab.alloc(int(length))
	} else {
		data = make([]byte, length)
	}
	if _, err := io.ReadFull(it.r, data); err != nil {
		it.done = true
		return nil, fmt.Errorf("read %s at offset %d: %w", it.fr.path, start, err)
	}
	var tail [4]byte
	if _, err := io.ReadFull(it.r, tail[:]); err != nil {
		it.done = true
		return nil, fmt.Errorf("read %s at offset %d: %w", it.fr.path, start, err)
	}
	it.pos = start + tfrecordOverhead + int64(length)
	if binary.LittleEndian.Uint32(tail[:]) != MaskedCRC32C(data) {
		return nil, it.recErr(start, ErrCorruptRecord, "corrupt record (data CRC mismatch)")
	}
	return data, nil
}

// resync moves to the first offset >= from holding a header whose CRC
// matches and whose record fits in the file; to the end if there is none.
func (it *tfrecordIter) resync(from int64) {
	w := window{f: it.fr.f, size: it.fr.size}
	for p := from; p+tfrecordOverhead <= it.fr.size; p++ {
		hdr, err := w.at(p, 12)
		if err != nil {
			break
		}
		if length, ok := headerAt(hdr); ok && length <= uint64(it.fr.size-p-tfrecordOverhead) {
			it.seek(p)
			return
		}
	}
	it.done = true
}

func (it *tfrecordIter) Close() error { return it.fr.f.Close() }
