package fn

import (
	"unicode"
	"unicode/utf8"
)

// o200k_base's pattern (OpenAI's GPT-4o encoding):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Its word classes overlap (Lm, Lo and marks are both "upper" and
// "lower"), so instead of a hand-derived case analysis the word
// alternatives run on a small backtracking matcher over character classes,
// with a regular expression's leftmost-first, greedy semantics.
const patternO200K = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Character class bits.
const (
	cLu uint16 = 1 << iota
	cLt
	cLl
	cLm
	cLo
	cM
	cN
	cSpace // White_Space
	cCR
	cLF
	cSlash
	cBlank // U+0020

	cLetter = cLu | cLt | cLl | cLm | cLo
	cUpper  = cLu | cLt | cLm | cLo | cM
	cLower  = cLl | cLm | cLo | cM
)

func classBits(r rune) uint16 {
	var m uint16
	switch {
	case unicode.IsLetter(r):
		switch {
		case unicode.IsUpper(r):
			m |= cLu
		case unicode.IsLower(r):
			m |= cLl
		case unicode.IsTitle(r):
			m |= cLt
		case unicode.Is(unicode.Lm, r):
			m |= cLm
		default:
			m |= cLo
		}
	case unicode.IsMark(r):
		m |= cM
	case unicode.IsNumber(r):
		m |= cN
	case unicode.IsSpace(r):
		m |= cSpace
	}
	switch r {
	case '\r':
		m |= cCR
	case '\n':
		m |= cLF
	case '/':
		m |= cSlash
	case ' ':
		m |= cBlank
	}
	return m
}

var asciiBits = func() (t [utf8.RuneSelf]uint16) {
	for c := range t {
		t[c] = classBits(rune(c))
	}
	return
}()

// o200kText is a segment decoded into characters: their class bits and
// byte offsets (starts[n] = len(b)). Invalid bytes are one character each,
// with no class bit (punctuation-like).
type o200kText struct {
	b      []byte
	bits   []uint16
	starts []int
}

func newO200KText(b []byte) *o200kText {
	t := &o200kText{b: b}
	for i := 0; i < len(b); {
		t.starts = append(t.starts, i)
		if c := b[i]; c < utf8.RuneSelf {
			t.bits = append(t.bits, asciiBits[c])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			t.bits = append(t.bits, 0)
		} else {
			t.bits = append(t.bits, classBits(r))
		}
		i += size
	}
	t.starts = append(t.starts, len(b))
	return t
}

// atom is one quantified character class of an alternative.
type atom struct {
	in       func(bits uint16) bool
	min, max int
}

func notLetterNumberCRLF(m uint16) bool { return m&(cLetter|cN|cCR|cLF) == 0 }
func upperish(m uint16) bool            { return m&cUpper != 0 }
func lowerish(m uint16) bool            { return m&cLower != 0 }

const many = int(^uint(0) >> 1)

var (
	o200kWord1 = []atom{{notLetterNumberCRLF, 0, 1}, {upperish, 0, many}, {lowerish, 1, many}}
	o200kWord2 = []atom{{notLetterNumberCRLF, 0, 1}, {upperish, 1, many}, {lowerish, 0, many}}
)

// matchWord matches atoms then an optional contraction from character ci,
// backtracking as a regular expression does; it returns the end character
// index, or -1.
func (t *o200kText) matchWord(atoms []atom, ci int) int {
	if len(atoms) == 0 {
		if n := t.contraction(ci); n > 0 {
			return ci + n
		}
		return ci
	}
	a := atoms[0]
	k := 0
	for k < a.max && ci+k < len(t.bits) && a.in(t.bits[ci+k]) {
		k++
	}
	for ; k >= a.min; k-- {
		if end := t.matchWord(atoms[1:], ci+k); end >= 0 {
			return end
		}
	}
	return -1
}

// contraction returns the characters of (?i:'s|'t|'re|'ve|'m|'ll|'d) at
// character ci (ASCII case), 0 if none.
func (t *o200kText) contraction(ci int) int {
	return contractionLen(t.b, t.starts[ci]) // ASCII: bytes are characters
}

// splitO200K calls f with each piece of b under o200k_base's pattern.
func splitO200K(b []byte, f func(piece []byte)) {
	t := newO200KText(b)
	for ci := 0; ci < len(t.bits); {
		end := t.pieceEnd(ci)
		f(b[t.starts[ci]:t.starts[end]])
		ci = end
	}
}

// pieceEnd returns the character index where the piece starting at ci
// ends (> ci).
func (t *o200kText) pieceEnd(ci int) int {
	bits, n := t.bits, len(t.bits)
	if end := t.matchWord(o200kWord1, ci); end > ci {
		return end
	}
	if end := t.matchWord(o200kWord2, ci); end > ci {
		return end
	}
	// \p{N}{1,3}
	if bits[ci]&cN != 0 {
		k := ci + 1
		for k < n && k < ci+3 && bits[k]&cN != 0 {
			k++
		}
		return k
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
	other := func(m uint16) bool { return m&(cSpace|cLetter|cN) == 0 }
	j := ci
	if bits[ci]&cBlank != 0 && ci+1 < n {
		j = ci + 1
	}
	if other(bits[j]) {
		k := j + 1
		for k < n && other(bits[k]) {
			k++
		}
		for k < n && bits[k]&(cCR|cLF|cSlash) != 0 {
			k++
		}
		return k
	}
	// White space: `\s*[\r\n]+` up to the run's last CR or LF, else
	// `\s+(?!\S)|\s+`.
	k, afterNL := ci, -1
	for k < n && bits[k]&cSpace != 0 {
		if bits[k]&(cCR|cLF) != 0 {
			afterNL = k + 1
		}
		k++
	}
	if afterNL > 0 {
		return afterNL
	}
	if k < n && k-1 > ci {
		return k - 1
	}
	if k == ci {
		return ci + 1 // not reached: every character is in some class above
	}
	return k
}
