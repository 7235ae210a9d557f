package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

type testHeader struct {
	Job    string   `cbor:"1,keyasint"`
	Seq    uint64   `cbor:"2,keyasint"`
	Shapes [][]int  `cbor:"3,keyasint,omitempty"`
	Names  []string `cbor:"4,keyasint,omitempty"`
}

func mustCodec(tb testing.TB, maxHeader int, maxFrame int64) *Codec {
	tb.Helper()
	c, err := NewCodec(maxHeader, maxFrame)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func rawFrame(hl uint32, tl uint64, rest ...byte) []byte {
	p := make([]byte, prefixLen, prefixLen+len(rest))
	p[0] = frameVersion
	binary.BigEndian.PutUint32(p[1:5], hl)
	binary.BigEndian.PutUint64(p[5:13], tl)
	return append(p, rest...)
}

func TestFrameRoundTrip(t *testing.T) {
	c := mustCodec(t, 1024, 1<<20)
	var buf bytes.Buffer
	h := testHeader{Job: "j", Seq: 7, Shapes: [][]int{{2, 3}}, Names: []string{"x"}}
	t1, t2 := []byte("tensor-one"), bytes.Repeat([]byte{0xab}, 1000)
	if err := c.WriteFrame(&buf, h, t1, nil, t2); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFrame(&buf, testHeader{Job: "empty"}); err != nil {
		t.Fatal(err)
	}
	var got testHeader
	tail, err := c.ReadFrame(&buf, &got)
	if err != nil {
		t.Fatal(err)
	}
	if got.Job != "j" || got.Seq != 7 || got.Shapes[0][1] != 3 || got.Names[0] != "x" {
		t.Fatalf("header %+v", got)
	}
	if !bytes.Equal(tail, append(append([]byte{}, t1...), t2...)) {
		t.Fatalf("tail of %d bytes differs", len(tail))
	}
	// Into a caller buffer; alloc is told the exact size.
	pool := make([]byte, 4096)
	var asked int
	tail, err = c.ReadFrameInto(&buf, &got, func(n int) []byte { asked = n; return pool })
	if err != nil || tail != nil || got.Job != "empty" || asked != 0 {
		t.Fatalf("empty tail frame: %v, tail %v, job %q, alloc asked %d", err, tail, got.Job, asked)
	}
	// Clean end of stream between frames is io.EOF itself.
	if _, err := c.ReadFrame(&buf, &got); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}

	buf.Reset()
	c.WriteFrame(&buf, h, t2)
	tail, err = c.ReadFrameInto(&buf, nil, func(n int) []byte { asked = n; return pool })
	if err != nil || asked != len(t2) || &tail[0] != &pool[0] || !bytes.Equal(tail, t2) {
		t.Fatalf("ReadFrameInto: %v, asked %d, same buffer %v", err, asked, &tail[0] == &pool[0])
	}
	buf.Reset()
	c.WriteFrame(&buf, h, t2)
	if _, err := c.ReadFrameInto(&buf, nil, func(int) []byte { return make([]byte, 10) }); err == nil {
		t.Fatal("ReadFrameInto accepted a too small buffer")
	}
}

func TestFrameBounds(t *testing.T) {
	c := mustCodec(t, 64, 1024)
	var buf bytes.Buffer
	if err := c.WriteFrame(&buf, testHeader{Job: string(make([]byte, 100))}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("big header written: %v", err)
	}
	if err := c.WriteFrame(&buf, testHeader{}, make([]byte, 1024)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("big tail written: %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes written by refused frames", buf.Len())
	}
	cases := map[string]struct {
		raw  []byte
		want error
	}{
		"header over limit":  {rawFrame(65, 0), ErrFrameTooLarge},
		"tail over limit":    {rawFrame(1, 1024, 0xf6), ErrFrameTooLarge},
		"sum over limit":     {rawFrame(64, 961), ErrFrameTooLarge},
		"tail 2^64-1":        {rawFrame(1, ^uint64(0), 0xf6), ErrFrameTooLarge},
		"empty header":       {rawFrame(0, 0), ErrMalformedFrame},
		"bad version":        {append([]byte{9}, rawFrame(1, 0, 0xf6)[1:]...), ErrMalformedFrame},
		"truncated prefix":   {rawFrame(1, 0)[:5], ErrMalformedFrame},
		"truncated header":   {rawFrame(4, 0, 0x83, 1), ErrMalformedFrame},
		"truncated tail":     {rawFrame(1, 10, 0xf6, 1, 2, 3), ErrMalformedFrame},
		"trailing in header": {rawFrame(2, 0, 0xf6, 0xf6), ErrMalformedFrame},
		"indefinite length":  {rawFrame(3, 0, 0x9f, 0x01, 0xff), ErrMalformedFrame},
		"duplicate map key":  {rawFrame(5, 0, 0xa2, 0x01, 0x01, 0x01, 0x02), ErrMalformedFrame},
		"invalid utf8":       {rawFrame(2, 0, 0x61, 0xff), ErrMalformedFrame},
		"deep nesting":       {rawFrame(21, 0, append(bytes.Repeat([]byte{0x81}, 20), 0)...), ErrMalformedFrame},
	}
	for name, tc := range cases {
		var h any
		_, err := c.ReadFrame(bytes.NewReader(tc.raw), &h)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	var m map[int]int
	if err := c.Unmarshal([]byte{0xa2, 0x01, 0x01, 0x01, 0x02}, &m); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("Unmarshal accepted a duplicate key: %v", err)
	}
}

// TestHugeFrameClaimAllocatesNothing: a prefix claiming 10 GiB is rejected
// before any buffer is allocated for it.
func TestHugeFrameClaimAllocatesNothing(t *testing.T) {
	c := mustCodec(t, 64<<10, 256<<20)
	raw := rawFrame(1, 10<<30, 0xf6)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := c.ReadFrame(bytes.NewReader(raw), nil); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("100 rejected 10 GiB claims allocated %d bytes", d)
	}
}

func TestCodecArgs(t *testing.T) {
	if _, err := NewCodec(8, 100); err == nil {
		t.Fatal("tiny header bound accepted")
	}
	if _, err := NewCodec(1024, 100); err == nil {
		t.Fatal("frame bound below header bound accepted")
	}
}

func BenchmarkWriteReadFrame(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			c := mustCodec(b, 64<<10, 256<<20)
			payload := make([]byte, size.n)
			dst := make([]byte, size.n)
			alloc := func(int) []byte { return dst }
			h := testHeader{Job: "job", Seq: 1, Shapes: [][]int{{size.n / 4}}, Names: []string{"x"}}
			var buf bytes.Buffer
			buf.Grow(size.n + 1024)
			var got testHeader
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := c.WriteFrame(&buf, h, payload); err != nil {
					b.Fatal(err)
				}
				if _, err := c.ReadFrameInto(&buf, &got, alloc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
