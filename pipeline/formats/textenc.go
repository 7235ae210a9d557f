package formats

import (
	"fmt"
	"unicode/utf8"
)

// Text encodings and what to do with a line that is not valid UTF-8 (the
// files source's encoding and on_invalid options).
const (
	// EncodingUTF8: lines must be valid UTF-8 (the default).
	EncodingUTF8 = "utf8"
	// EncodingBytes: lines are byte strings, never checked (lines only).
	EncodingBytes = "bytes"

	// OnInvalidFail: an invalid line is an error naming the file, line and
	// offset (the default for lines).
	OnInvalidFail = "fail"
	// OnInvalidSkip: an invalid line is dropped and counted.
	OnInvalidSkip = "skip"
	// OnInvalidReplace: each invalid sequence of the line becomes U+FFFD,
	// and the line is counted.
	OnInvalidReplace = "replace"
)

// validateTextEncoding checks Encoding and OnInvalid against the format.
// Messages name the option.
func (o FilesOptions) validateTextEncoding() error {
	switch o.Encoding {
	case "", EncodingUTF8, EncodingBytes:
	default:
		return fmt.Errorf("encoding: %q is not utf8 or bytes", o.Encoding)
	}
	switch o.OnInvalid {
	case "", OnInvalidFail, OnInvalidSkip, OnInvalidReplace:
	default:
		return fmt.Errorf("on_invalid: %q is not fail, skip or replace", o.OnInvalid)
	}
	text := o.Format == FormatLines || o.Format == FormatJSONL
	if o.Encoding != "" && !text {
		return fmt.Errorf("encoding: only lines and jsonl take an encoding, not %s", o.Format)
	}
	if o.OnInvalid != "" && !text {
		return fmt.Errorf("on_invalid: only lines and jsonl take on_invalid, not %s", o.Format)
	}
	if o.Encoding == EncodingBytes && o.Format == FormatJSONL {
		return fmt.Errorf("encoding: jsonl is JSON text, which is UTF-8; use format lines for encoding bytes, or on_invalid to handle bad lines")
	}
	if o.Encoding == EncodingBytes && o.OnInvalid != "" {
		return fmt.Errorf("on_invalid: %s needs encoding utf8; encoding bytes never checks lines", o.OnInvalid)
	}
	return nil
}

// onInvalid returns what the line reader does with an invalid line: fail,
// skip or replace, or "" for no check (encoding bytes, or jsonl without
// on_invalid, which leaves the line to the JSON decoder as it always has).
func (o FilesOptions) onInvalid() string {
	switch {
	case o.Encoding == EncodingBytes:
		return ""
	case o.OnInvalid != "":
		return o.OnInvalid
	case o.Format == FormatLines:
		return OnInvalidFail
	}
	return ""
}

// invalidUTF8At returns the index of the first byte of b that does not
// start a valid UTF-8 sequence, or -1 when b is valid.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// replacedLen is the length of appendReplacingInvalid(nil, b).
func replacedLen(b []byte) int {
	n := 0
	for i := 0; i < len(b); {
		size, ok := nextSequence(b[i:])
		if ok {
			n += size
		} else {
			n += utf8.RuneLen(utf8.RuneError)
		}
		i += size
	}
	return n
}

// appendReplacingInvalid appends b to dst with each invalid sequence
// replaced by U+FFFD. A sequence is the maximal prefix of a well-formed
// one (Unicode's recommended practice, as in WHATWG decoders and Python's
// errors="replace"): a truncated 3-byte sequence becomes one U+FFFD, a
// lone continuation byte or a byte that cannot start a sequence one each.
// The result is at most 3 × len(b) bytes.
func appendReplacingInvalid(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		size, ok := nextSequence(b[i:])
		if ok {
			dst = append(dst, b[i:i+size]...)
		} else {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		i += size
	}
	return dst
}

// nextSequence returns the length of the sequence at the start of b (len(b)
// > 0) and whether it is valid UTF-8. An invalid one is the longest prefix
// of b that could begin a well-formed sequence, at least one byte.
func nextSequence(b []byte) (int, bool) {
	if b[0] < utf8.RuneSelf {
		return 1, true
	}
	if r, size := utf8.DecodeRune(b); r != utf8.RuneError || size != 1 {
		return size, true
	}
	// The lead byte's length and the allowed range of the second byte
	// (Unicode Table 3-7): these exclude overlongs, surrogates and code
	// points above U+10FFFF.
	lo, hi := byte(0x80), byte(0xBF)
	var n int
	switch lead := b[0]; {
	case lead >= 0xC2 && lead <= 0xDF:
		n = 2
	case lead == 0xE0:
		n, lo = 3, 0xA0
	case lead == 0xED:
		n, hi = 3, 0x9F
	case lead >= 0xE1 && lead <= 0xEF:
		n = 3
	case lead == 0xF0:
		n, lo = 4, 0x90
	case lead >= 0xF1 && lead <= 0xF3:
		n = 4
	case lead == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1, false // continuation byte, C0, C1 or F5–FF
	}
	k := 1
	for k < n && k < len(b) {
		c := b[k]
		if k == 1 && (c < lo || c > hi) || k > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
		k++
	}
	return k, false
}
