package formats

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// Decompression bombs of the codecs whose data announces no decoded
// length that parquet-go checks (issue 37, item 5): parquet-go inflates
// a brotli page into a buffer grown without bound, retries an LZ4_RAW
// block into a buffer doubled for as long as decoding fails (a corrupt
// block: until memory runs out), and decodes a zstd frame without a
// content size (or a second frame after a first that has one) into a
// growing buffer. checkBoundedLen counts what the page decodes to, in
// bounded memory and without keeping it, and refuses a page that would
// pass its header's uncompressed size.

// zstdCheckWindow is the largest zstd window a page's check accepts
// beyond the page's own size: a frame may say it needs a window larger
// than its content (encoders choose it by level; 8 MiB is zstd's level
// 19's), but not arbitrarily larger.
const zstdCheckWindow = 8 << 20

// errPageBomb is the refusal of a page decoding past its declared size.
var errPageBomb = errors.New("a decompression bomb, or a corrupt file")

// checkBoundedLen checks the page data [at, end) of codec against want,
// the page header's uncompressed size, for the codecs checkDecodedLen
// does not bound. handled is false for other codecs.
func checkBoundedLen(r io.ReaderAt, codec format.CompressionCodec, at, end, want int64) (handled bool, err error) {
	sr := io.NewSectionReader(r, at, end-at)
	switch codec {
	case format.Brotli:
		return true, countBounded(codec, brotli.NewReader(sr), want)
	case format.Lz4Raw:
		n, err := lz4BlockLen(bufio.NewReaderSize(sr, 32<<10), want)
		if err != nil {
			return true, fmt.Errorf("%v page data: %w", codec, err)
		}
		if n > want {
			return true, fmt.Errorf("%v page data decodes to more than %d bytes, its page header's uncompressed size: %w", codec, want, errPageBomb)
		}
		return true, nil
	case format.Zstd:
		bound, err := zstdBound(bufio.NewReaderSize(sr, 32<<10))
		if err != nil {
			return true, nil // parquet-go reports the corrupt frame
		}
		if bound <= uint64(want) {
			return true, nil // its frames cannot decode to more
		}
		window := uint64(max(want, zstdCheckWindow))
		zr, err := zstd.NewReader(io.NewSectionReader(r, at, end-at), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window))
		if err != nil {
			return true, fmt.Errorf("%v page data: %v", codec, err)
		}
		defer zr.Close()
		return true, countBounded(codec, zr, want)
	}
	return false, nil
}

// countBounded reads what zr decodes, one byte past want at most.
func countBounded(codec format.CompressionCodec, zr io.Reader, want int64) error {
	k, err := io.Copy(io.Discard, io.LimitReader(zr, want+1))
	if k > want {
		return fmt.Errorf("%v page data decodes to more than %d bytes, its page header's uncompressed size: %w", codec, want, errPageBomb)
	}
	if err != nil && errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return fmt.Errorf("%v page data: a frame's window is over %d bytes (the page's size or %d): %v", codec, max(want, zstdCheckWindow), zstdCheckWindow, err)
	}
	return nil // a corrupt stream: parquet-go reports it
}

// lz4BlockLen walks an LZ4 block's sequences without decoding them and
// returns the length it decodes to, stopping once past limit. A block
// that is truncated or refers before its start is an error (parquet-go
// would retry it into ever larger buffers).
func lz4BlockLen(br *bufio.Reader, limit int64) (int64, error) {
	var n int64
	extLen := func(l int64) (int64, error) {
		for {
			b, err := br.ReadByte()
			if err != nil {
				return 0, errors.New("lz4 block truncated in a length")
			}
			l += int64(b)
			if b != 255 {
				return l, nil
			}
			if l > limit {
				return l, nil
			}
		}
	}
	for {
		tok, err := br.ReadByte()
		if err == io.EOF && n == 0 {
			return 0, nil
		}
		if err != nil {
			return 0, errors.New("lz4 block truncated")
		}
		lit := int64(tok >> 4)
		if lit == 15 {
			if lit, err = extLen(lit); err != nil {
				return 0, err
			}
		}
		if lit > limit {
			return lit, nil
		}
		if d, err := br.Discard(int(lit)); err != nil || int64(d) != lit {
			return 0, errors.New("lz4 block truncated in its literals")
		}
		n += lit
		var off [2]byte
		if _, err := io.ReadFull(br, off[:]); err != nil {
			if err == io.EOF {
				return n, nil // the last sequence: literals only
			}
			return 0, errors.New("lz4 block truncated in an offset")
		}
		o := int64(binary.LittleEndian.Uint16(off[:]))
		if o == 0 || o > n {
			return 0, fmt.Errorf("lz4 block refers %d bytes back from %d", o, n)
		}
		m := int64(tok & 15)
		if m == 15 {
			if m, err = extLen(m); err != nil {
				return 0, err
			}
		}
		n += m + 4
		if n > limit {
			return n, nil
		}
	}
}

// zstdBound is the most a page's zstd frames may decode to, walked by
// their headers and block headers without decoding: a frame's content
// size if it says one (the decoder holds it to that), else its blocks'
// (a raw or RLE block's size, 128 KiB for a compressed one). Skippable
// frames count nothing.
func zstdBound(br *bufio.Reader) (uint64, error) {
	var total uint64
	var hdr [14]byte
	for {
		if _, err := io.ReadFull(br, hdr[:4]); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return 0, err
		}
		magic := binary.LittleEndian.Uint32(hdr[:4])
		if magic&0xFFFFFFF0 == 0x184D2A50 { // skippable
			if _, err := io.ReadFull(br, hdr[:4]); err != nil {
				return 0, err
			}
			if _, err := br.Discard(int(binary.LittleEndian.Uint32(hdr[:4]))); err != nil {
				return 0, err
			}
			continue
		}
		if magic != 0xFD2FB528 {
			return 0, errors.New("not a zstd frame")
		}
		fhd, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		single := fhd&0x20 != 0
		n := []int{0, 1, 2, 4}[fhd&3]
		if !single {
			n++
		}
		fcs := []int{0, 2, 4, 8}[fhd>>6]
		if fhd>>6 == 0 && single {
			fcs = 1
		}
		rest := hdr[:n+fcs]
		if _, err := io.ReadFull(br, rest); err != nil {
			return 0, err
		}
		p := append([]byte{0x28, 0xB5, 0x2F, 0xFD, fhd}, rest...)
		size, sized := zstdContentSize(p)
		var blocks uint64
		for last := false; !last; {
			var bh [3]byte
			if _, err := io.ReadFull(br, bh[:]); err != nil {
				return 0, err
			}
			v := uint32(bh[0]) | uint32(bh[1])<<8 | uint32(bh[2])<<16
			last = v&1 != 0
			bsize := int(v >> 3)
			switch (v >> 1) & 3 {
			case 0: // raw
				blocks += uint64(bsize)
				_, err = br.Discard(bsize)
			case 1: // RLE
				blocks += uint64(bsize)
				_, err = br.Discard(1)
			case 2: // compressed
				blocks += 128 << 10
				_, err = br.Discard(bsize)
			default:
				return 0, errors.New("reserved zstd block type")
			}
			if err != nil {
				return 0, err
			}
		}
		if fhd&0x04 != 0 {
			if _, err := br.Discard(4); err != nil {
				return 0, err
			}
		}
		if sized {
			total += size
		} else {
			total += blocks
		}
	}
}
