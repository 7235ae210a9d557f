package transport

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadFrame reads a stream of frames from arbitrary bytes. It must never
// panic or allocate past the bounds, must fail with a wrapped sentinel (or
// io.EOF) on bad input, and every frame it accepts must survive a re-encode.
// Seeds live in testdata/fuzz/FuzzReadFrame.
func FuzzReadFrame(f *testing.F) {
	const maxHeader, maxFrame = 16 << 10, 1 << 20
	c := mustCodec(f, maxHeader, maxFrame)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		rg := bytes.NewReader(data) // the same frames through ReadFrameGrow
		for range 16 {
			var h any
			tail, err := c.ReadFrame(r, &h)
			var hg any
			reserved := 0
			gtail, gerr := c.ReadFrameGrow(rg, &hg, 7, func(n int) error { reserved += n; return nil })
			if (err == nil) != (gerr == nil) || !bytes.Equal(tail, gtail) {
				t.Fatalf("ReadFrameGrow: %v and %d tail bytes, ReadFrame: %v and %d", gerr, len(gtail), err, len(tail))
			}
			if gerr == nil && len(gtail) > 7 && reserved != len(gtail)-7 {
				t.Fatalf("ReadFrameGrow reserved %d bytes for a %d-byte tail read into 7 free ones", reserved, len(gtail))
			}
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrMalformedFrame) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(tail) > maxFrame {
				t.Fatalf("accepted a %d-byte tail", len(tail))
			}
			var buf bytes.Buffer
			if err := c.WriteFrame(&buf, h, tail); err != nil {
				if errors.Is(err, ErrFrameTooLarge) {
					continue // re-encoding may be longer (e.g. float16 read back as float64)
				}
				t.Fatalf("re-encode accepted frame: %v", err)
			}
			back, err := c.ReadFrame(&buf, nil)
			if err != nil || !bytes.Equal(back, tail) {
				t.Fatalf("re-read: %v, tail equal %v", err, bytes.Equal(back, tail))
			}
			// The typed path must not panic either.
			var th testHeader
			_ = c.Unmarshal(mustMarshal(t, c, h), &th)
		}
	})
}

func mustMarshal(t *testing.T, c *Codec, v any) []byte {
	b, err := c.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}
