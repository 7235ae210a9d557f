package fn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// JPEGs are decoded by libjpeg-turbo when the binary was built with cgo
// against jpeglib.h and the shared library is found at run time
// (jpeg_cgo.go), else by image/jpeg. Other formats always take the
// pure-Go decoders.

var (
	errUnsupportedJPEG = errors.New("a color space libjpeg-turbo does not convert to RGB")
	errTooManyPixels   = errors.New("too many pixels")
	errTruncatedJPEG   = errors.New("jpeg: truncated JPEG (no end-of-image marker after the scan)")
)

// region is a rectangle of pixels; an empty one (w == 0) means the whole
// image.
type region struct{ x, y, w, h int }

var jpegLib struct {
	once sync.Once
	desc string // libjpeg-turbo's description when it is used
	why  string // why not, when it is not
}

// goJPEG forces image/jpeg (tests compare the two decoders).
var goJPEG atomic.Bool

func loadJPEG() {
	jpegLib.once.Do(func() {
		if v := os.Getenv("FEEDMESH_JPEG"); v == "go" {
			jpegLib.why = "FEEDMESH_JPEG=go"
			return
		}
		desc, err := turboLoad()
		if err != nil {
			jpegLib.why = err.Error()
			return
		}
		jpegLib.desc = desc
	})
}

// turbo reports whether JPEGs are decoded by libjpeg-turbo.
func turbo() bool {
	loadJPEG()
	return jpegLib.desc != "" && !goJPEG.Load()
}

// JPEGDecoder describes the JPEG decoder of decode_image and
// decode_and_crop: "libjpeg-turbo 2.1.5 (libjpeg.so.62)", or "image/jpeg
// (pure Go, slower): <why libjpeg-turbo is not used>"; fast reports the
// former. Nodes log it once at start and `feedmesh version` prints it.
func JPEGDecoder() (desc string, fast bool) {
	loadJPEG()
	if jpegLib.desc != "" {
		return jpegLib.desc, true
	}
	return "image/jpeg (pure Go, slower): " + jpegLib.why, false
}

// jpegHeader reads a JPEG's size and number of components from its frame
// header (SOFn) without decoding anything. ok is false when b does not
// start like a JPEG; err is set when it does but the header is broken.
func jpegHeader(b []byte) (w, h, comps int, ok bool, err error) {
	w, h, comps, _, ok, err = jpegMarkers(b)
	return
}

// jpegMarkers is jpegHeader, and the offset of the first scan (SOS).
func jpegMarkers(b []byte) (w, h, comps, scan int, ok bool, err error) {
	if len(b) < 3 || b[0] != 0xff || b[1] != 0xd8 || b[2] != 0xff {
		return 0, 0, 0, 0, false, nil
	}
	i := 2
	for {
		if i+1 >= len(b) {
			return 0, 0, 0, 0, true, errors.New("truncated JPEG: no frame header")
		}
		if b[i] != 0xff {
			return 0, 0, 0, 0, true, fmt.Errorf("corrupt JPEG: byte %#02x at offset %d where a marker was expected", b[i], i)
		}
		m := b[i+1]
		switch {
		case m == 0xff: // fill byte
			i++
			continue
		case m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7): // standalone markers
			i += 2
			continue
		case m == 0xd9 || (m == 0xda && w == 0):
			return 0, 0, 0, 0, true, errors.New("corrupt JPEG: no frame header before the scan")
		case m == 0xda:
			return w, h, comps, i, true, nil
		}
		if i+4 > len(b) {
			return 0, 0, 0, 0, true, errors.New("truncated JPEG: no frame header")
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if n < 2 {
			return 0, 0, 0, 0, true, fmt.Errorf("corrupt JPEG: marker %#02x at offset %d has length %d", m, i, n)
		}
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc && w == 0 {
			if n < 8 || i+10 > len(b) {
				return 0, 0, 0, 0, true, errors.New("truncated JPEG: short frame header")
			}
			h = int(binary.BigEndian.Uint16(b[i+5:]))
			w = int(binary.BigEndian.Uint16(b[i+7:]))
			comps = int(b[i+9])
			if w == 0 || h == 0 {
				return 0, 0, 0, 0, true, fmt.Errorf("JPEG of %dx%d (a height defined by a DNL marker is not supported)", w, h)
			}
		}
		i += 2 + n
	}
}

// jpegComplete reports whether an end-of-image marker follows the first
// scan: a file cut anywhere after its headers has none there (in
// entropy-coded data 0xFF is followed by 0x00 or a restart marker, and a
// thumbnail's EOI is in a header before the scan). decode_and_crop, which
// stops reading after its window's rows, checks it, so that a truncated
// file is an error whichever window an epoch draws.
func jpegComplete(b []byte, scan int) bool {
	return bytes.LastIndex(b, []byte{0xff, 0xd9}) > scan
}

// scaledSize is libjpeg's output size at scale 1/denom: ⌈n / denom⌉.
func scaledSize(n, denom int) int { return (n + denom - 1) / denom }
