package autocache

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

// TestHeaderSource: a file records the source version of the input it was
// computed from and gives it back; a version-1 file (no source) reads as
// an empty one, and still reads.
func TestHeaderSource(t *testing.T) {
	const fp = "abcdef0123456789"
	for _, h := range []Header{{Prefix: fp, Split: 7, Source: "size=10,mtime=1700000000000000000"}, {Prefix: fp, Split: 8}} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, h)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(0, tensor.Element{}); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Header != h {
			t.Fatalf("header %+v, want %+v", r.Header, h)
		}
	}
	// A version-1 file, as this package wrote them before the source.
	b := append([]byte(headerMagic), 1, byte(len(fp)))
	b = append(b, fp...)
	b = binary.LittleEndian.AppendUint64(b, 5)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	t1 := []byte(trailerMagic)
	t1 = binary.LittleEndian.AppendUint64(t1, 0)
	t1 = binary.LittleEndian.AppendUint64(t1, 0)
	t1 = binary.LittleEndian.AppendUint32(t1, crc32.Checksum(t1, castagnoli))
	v1 := append(b, t1...)
	r, err := OpenReader(bytes.NewReader(v1), int64(len(v1)), nil)
	if err != nil {
		t.Fatalf("a version-1 file: %v", err)
	}
	if r.Header != (Header{Prefix: fp, Split: 5}) {
		t.Fatalf("version-1 header %+v", r.Header)
	}
	if _, err := NewWriter(io.Discard, Header{Prefix: fp, Source: strings.Repeat("x", MaxSourceBytes+1)}); err == nil {
		t.Fatal("a source version over MaxSourceBytes was written")
	}
}
