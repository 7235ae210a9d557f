package batch

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression names how the tail of a batch frame is compressed on the
// wire. The header stays uncompressed (it is small and the receiver must
// check it before allocating); the tail — all tensors' bytes, as one block
// — is compressed as a whole, and the header records its length before
// compression.
//
// A client asks for a compression in its OpenRequest (from the job's
// options, so every consumer of a job asks for the same); the worker
// confirms it in its Accept and compresses each frame it sends on the
// stream, unless compression would save less than 1/16 of the tail
// (random bytes, already-compressed images): such a frame goes
// uncompressed, which its header says. A frame shared by several streams is
// compressed once per compression, by the first stream that sends it, and
// keeps the result while it lives (a share window's byte bound counts the
// uncompressed frame only).
type Compression uint8

const (
	// CompressNone sends tails as they are.
	CompressNone Compression = 0
	// CompressLZ4 is LZ4 block compression (github.com/pierrec/lz4/v4):
	// decompression is cheap (~3.5 GB/s on the benchmark machine),
	// compression ~450 MB/s per core. On bucketed token batches it saves
	// 37% of the unpadded bytes, but only 7% once token ids are narrowed
	// (EncodeOptions.Narrow, the worker's default).
	CompressLZ4 Compression = 1
	// CompressZstd is Zstandard at its fastest level
	// (github.com/klauspost/compress/zstd): 53% of the unpadded token bytes,
	// 20% of the narrowed ones, at ~150 MB/s per core of compression and
	// ~600 MB/s of decompression; for links much slower than the workers'
	// CPUs.
	CompressZstd Compression = 2
)

// numCompressions bounds the Compression values, CompressNone included.
const numCompressions = 3

// Compressions lists the names ParseCompression accepts, in order.
var Compressions = []string{"none", "lz4", "zstd"}

// ParseCompression parses a compression name: "none" (or ""), "lz4" or
// "zstd", in any case.
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return CompressNone, nil
	case "lz4":
		return CompressLZ4, nil
	case "zstd":
		return CompressZstd, nil
	}
	return CompressNone, fmt.Errorf("compression %q: want one of %s", s, strings.Join(Compressions, ", "))
}

// String returns the name ParseCompression accepts.
func (c Compression) String() string {
	if c.Valid() {
		return Compressions[c]
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// Valid reports whether c is a known compression.
func (c Compression) Valid() bool { return c < numCompressions }

// zstdWindow is the zstd encoder's window (each encoder keeps about twice
// it as history); zstdMaxWindow the largest window the decoder accepts from
// a frame that declares one (frames whose content fits one window declare
// none and are bounded by their content size, which the header's RawTail
// bounds); zstdEncoders bounds the encoders and decoders kept, and so their
// memory (a decoder may keep a window of history: zstdMaxWindow at most).
const (
	zstdWindow    = 1 << 20
	zstdMaxWindow = 2 << 20
	zstdEncoders  = 4 // and decoders
)

// The zstd encoder and decoder are shared by every stream: EncodeAll and
// DecodeAll are safe for concurrent use (up to zstdEncoders and GOMAXPROCS
// at once; more wait) and start no goroutines.
var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), zstdEncoders)),
			zstd.WithWindowSize(zstdWindow),
			zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false)) // QUIC's AEAD already protects the bytes
	})
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(min(runtime.GOMAXPROCS(0), zstdEncoders)),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecodeAllCapLimit(true))
	})
	lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}
)

// maxPooledGather bounds the gather buffers compressTail keeps in its pool.
const maxPooledGather = 4 << 20

var gatherPool = sync.Pool{New: func() any { return new([]byte) }}

// compressTail compresses the concatenated segments (n bytes in all) and
// returns the compressed block in a buffer of its own, of its exact size,
// or nil when c would not save at least 1/16 of the bytes.
func compressTail(c Compression, segs [][]byte, n int64) ([]byte, error) {
	src, srcDone := gatherBuf(int(n))
	defer srcDone()
	src = src[:0]
	for _, s := range segs {
		src = append(src, s...)
	}
	limit := int(n - n/16) // worth sending compressed only below this
	dst, dstDone := gatherBuf(limit)
	defer dstDone()
	switch c {
	case CompressLZ4:
		lc := lz4Compressors.Get().(*lz4.Compressor)
		k, err := lc.CompressBlock(src, dst[:limit])
		lz4Compressors.Put(lc)
		if k == 0 || err != nil { // does not fit: incompressible
			return nil, nil
		}
		dst = dst[:k]
	case CompressZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
		dst = enc.EncodeAll(src, dst[:0])
		if len(dst) >= limit {
			return nil, nil
		}
	default:
		return nil, fmt.Errorf("compress batch: unknown %v", c)
	}
	return bytes.Clone(dst), nil
}

// gatherBuf returns a scratch buffer of length n from gatherPool and the
// func that gives it back (buffers above maxPooledGather are not kept).
func gatherBuf(n int) ([]byte, func()) {
	bp := gatherPool.Get().(*[]byte)
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	return (*bp)[:n], func() {
		if cap(*bp) <= maxPooledGather {
			gatherPool.Put(bp)
		}
	}
}

// decompressTail decompresses a tail compressed with c into dst, which
// must come out exactly full.
func decompressTail(c Compression, src, dst []byte) error {
	switch c {
	case CompressLZ4:
		k, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return malformed("lz4 tail: %v", err)
		}
		if k != len(dst) {
			return malformed("lz4 tail decompresses to %d bytes, header says %d", k, len(dst))
		}
		return nil
	case CompressZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return fmt.Errorf("zstd decoder: %w", err)
		}
		out, err := dec.DecodeAll(src, dst[:0:len(dst)]) // never past dst, whatever alloc's capacity
		if err != nil {
			return malformed("zstd tail: %v", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return malformed("zstd tail decompresses to %d bytes, header says %d", len(out), len(dst))
		}
		return nil
	}
	return malformed("unknown %v", c)
}

// Compressed returns f as sent with compression c: a frame whose tail is
// compressed, or f itself when c is CompressNone, when f is already
// compressed, or when compressing would save less than 1/16 of it. The
// result is computed once per compression and kept with f (so a frame
// shared by streams is compressed once, and a producer can compress ahead
// of the stream that sends it); the compressed tail is at most f's size.
func (f *Frame) Compressed(c Compression) (*Frame, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("compress batch: unknown %v", c)
	}
	if c == CompressNone || f.m.Comp != CompressNone || f.tailLen == 0 {
		return f, nil
	}
	z := &f.z[c]
	z.once.Do(func() { z.f, z.err = f.compress(c) })
	return z.f, z.err
}

// compress builds the compressed variant of f.
func (f *Frame) compress(c Compression) (*Frame, error) {
	b, err := compressTail(c, f.tail, f.tailLen)
	if err != nil || b == nil {
		return f, err
	}
	m := f.m
	m.Comp, m.RawTail = c, f.tailLen
	hb, err := f.codec.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("encode compressed batch: %w", err)
	}
	if len(hb) > f.codec.MaxHeaderBytes() {
		return f, nil // the two more header fields do not fit: send it as it is
	}
	return &Frame{codec: f.codec, m: m, hdr: hb, tail: [][]byte{b}, tailLen: int64(len(b))}, nil
}

// lazyFrame is one lazily built variant of a Frame (compressed).
type lazyFrame struct {
	once sync.Once
	f    *Frame
	err  error
}
