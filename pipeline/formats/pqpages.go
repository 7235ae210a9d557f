package formats

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// MaxParquetPageBytes bounds one Parquet page, compressed or not. Page
// sizes are read from the file and parquet-go allocates them before it
// decodes a byte, so a corrupt header could ask for gigabytes. Writers cut
// pages at about 1 MiB (Arrow, Spark, parquet-go); dictionary pages can be
// larger, but not this large.
const MaxParquetPageBytes = 256 << 20

// pageHeaderWindow is how much is read to decode a page header at first;
// a header with large statistics is read again with maxPageHeaderBytes.
const (
	pageHeaderWindow   = 4 << 10
	maxPageHeaderBytes = 1 << 20
)

// checkChunkPages walks a column chunk's page headers before parquet-go
// decodes the chunk, checking what parquet-go trusts: every page lies
// inside the chunk, its sizes are within MaxParquetPageBytes and the
// chunk's uncompressed size, and the decoded length a snappy or zstd
// page announces is its header's. It returns the offset of the page at
// fault with the reason.
func checkChunkPages(r io.ReaderAt, md *format.ColumnMetaData, fileSize int64) (int64, error) {
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	end := start + md.TotalCompressedSize
	if start < 4 || md.TotalCompressedSize < 0 || end > fileSize || end < start {
		return start, fmt.Errorf("column chunk [%d, +%d) outside the file's %d bytes", start, md.TotalCompressedSize, fileSize)
	}
	if md.TotalUncompressedSize < 0 {
		return start, fmt.Errorf("column chunk of %d uncompressed bytes", md.TotalUncompressedSize)
	}
	proto := &thrift.CompactProtocol{}
	buf := make([]byte, 0, pageHeaderWindow)
	for off := start; off < end; {
		var h format.PageHeader
		var hdrLen int64
		for window := int64(pageHeaderWindow); ; window = maxPageHeaderBytes {
			n := min(window, end-off)
			buf = buf[:n]
			if _, err := r.ReadAt(buf, off); err != nil && err != io.EOF {
				return off, fmt.Errorf("read page header: %w", err)
			}
			k, err := checkThrift(buf) // before parquet-go allocates what it says
			if err == nil {
				h = format.PageHeader{}
				if err := thrift.NewDecoder(proto.NewReaderFromBytes(buf[:k])).Decode(&h); err != nil {
					return off, fmt.Errorf("page header: %v", err)
				}
				hdrLen = int64(k)
				break
			}
			if !errors.Is(err, errThriftShort) || n == end-off || window == maxPageHeaderBytes {
				return off, fmt.Errorf("page header: %v", err)
			}
		}
		cs, us := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		switch {
		case cs < 0 || us < 0:
			return off, fmt.Errorf("page of %d compressed, %d uncompressed bytes", cs, us)
		case off+hdrLen+cs > end:
			return off, fmt.Errorf("page of %d bytes runs past its column chunk's end (%d)", cs, end)
		case cs > MaxParquetPageBytes || us > MaxParquetPageBytes:
			return off, fmt.Errorf("page of %d compressed, %d uncompressed bytes, over the bound of %d", cs, us, MaxParquetPageBytes)
		case md.TotalUncompressedSize > 0 && us > md.TotalUncompressedSize:
			return off, fmt.Errorf("page of %d uncompressed bytes in a column chunk of %d", us, md.TotalUncompressedSize)
		}
		data := off + hdrLen
		want := us
		if v2 := h.DataPageHeaderV2; v2.Valid {
			levels := int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
			if levels < 0 || levels > cs || levels > us {
				return off, fmt.Errorf("data page v2 with %d bytes of levels in %d", levels, cs)
			}
			data += levels
			want -= levels
			if v2.V.IsCompressed.Valid && !v2.V.IsCompressed.V {
				off = off + hdrLen + cs
				continue
			}
		}
		if err := checkDecodedLen(r, md.Codec, data, off+hdrLen+cs, want); err != nil {
			return off, err
		}
		off += hdrLen + cs
	}
	return 0, nil
}

// checkDecodedLen checks the decoded length that compressed page data
// [at, end) announces (snappy: a varint first; zstd: its frames' content
// sizes, or what frames without one decode to) against the page
// header's; gzip, brotli and LZ4_RAW data are counted as they decode
// (checkBoundedLen).
func checkDecodedLen(r io.ReaderAt, codec format.CompressionCodec, at, end, want int64) error {
	if handled, err := checkBoundedLen(r, codec, at, end, want); handled {
		return err // brotli, LZ4_RAW, zstd
	}
	var b [18]byte
	n := min(int64(len(b)), end-at)
	if n <= 0 {
		return nil
	}
	if _, err := r.ReadAt(b[:n], at); err != nil && err != io.EOF {
		return fmt.Errorf("read page data: %w", err)
	}
	p := b[:n]
	var got uint64
	switch codec {
	case format.Gzip:
		// A gzip stream announces nothing reliable (its trailer's size is
		// checked only at its end): count what it inflates to, in a
		// 32 KiB window, stopping one byte past the header's size.
		// parquet-go then inflates it again, into a buffer grown without
		// bound, which this keeps from a decompression bomb.
		zr, err := gzip.NewReader(io.NewSectionReader(r, at, end-at))
		if err != nil {
			return nil // parquet-go reports the corrupt stream
		}
		k, _ := io.Copy(io.Discard, io.LimitReader(zr, want+1))
		if k > want {
			return fmt.Errorf("%v page data decodes to more than %d bytes, its header's size", codec, want)
		}
		return nil
	case format.Snappy:
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return fmt.Errorf("snappy page without its decoded length")
		}
		got = v
	default:
		return nil
	}
	if got > uint64(want) {
		return fmt.Errorf("%v page data decodes to %d bytes, its header says %d", codec, got, want)
	}
	return nil
}

// zstdContentSize reads a zstd frame header's content size, if it has one.
func zstdContentSize(p []byte) (uint64, bool) {
	if len(p) < 5 || binary.LittleEndian.Uint32(p) != 0xFD2FB528 {
		return 0, false
	}
	fhd := p[4]
	single := fhd&0x20 != 0
	at := 5
	if !single {
		at++ // window descriptor
	}
	at += []int{0, 1, 2, 4}[fhd&3] // dictionary id
	var size int
	switch fhd >> 6 {
	case 0:
		if !single {
			return 0, false
		}
		size = 1
	case 1:
		size = 2
	case 2:
		size = 4
	case 3:
		size = 8
	}
	if at+size > len(p) {
		return 0, false
	}
	f := p[at : at+size]
	switch size {
	case 1:
		return uint64(f[0]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(f)) + 256, true
	case 4:
		return uint64(binary.LittleEndian.Uint32(f)), true
	}
	return binary.LittleEndian.Uint64(f), true
}
