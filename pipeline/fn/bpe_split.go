package fn

import (
	"unicode"
	"unicode/utf8"
)

// GPT-2's pre-tokenizer is the regular expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (the ByteLevel pre-tokenizer of Hugging Face tokenizers, tiktoken's
// r50k_base). Go's regexp has no lookahead, so splitGPT2 implements the
// same leftmost-first alternation by hand.
//
// Classes follow Unicode as the Rust and Python references do: \s is
// White_Space (unicode.IsSpace), \p{L} letters, \p{N} numbers. JavaScript's
// \s differs on two code points (it excludes U+0085 and includes U+FEFF).
// Bytes that are not valid UTF-8 (the references never see them: they take
// strings) count as one "other" character each, so they end up in
// punctuation pieces and are encoded byte by byte like everything else.

// runeClass is what the pattern distinguishes about a character.
type runeClass uint8

const (
	classOther runeClass = iota
	classSpace
	classLetter
	classNumber
)

// classAt returns the class and byte width of the character at b[i].
func classAt(b []byte, i int) (runeClass, int) {
	c := b[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, size := utf8.DecodeRune(b[i:])
	if r == utf8.RuneError && size == 1 {
		return classOther, 1
	}
	switch {
	case unicode.IsSpace(r):
		return classSpace, size
	case unicode.IsLetter(r):
		return classLetter, size
	case unicode.IsNumber(r):
		return classNumber, size
	}
	return classOther, size
}

var asciiClass = func() (t [utf8.RuneSelf]runeClass) {
	for c := 0; c < utf8.RuneSelf; c++ {
		r := rune(c)
		switch {
		case unicode.IsSpace(r):
			t[c] = classSpace
		case unicode.IsLetter(r):
			t[c] = classLetter
		case unicode.IsNumber(r):
			t[c] = classNumber
		}
	}
	return t
}()

// splitGPT2 calls f with each piece of b, in order; the pieces concatenate
// to b.
func splitGPT2(b []byte, f func(piece []byte)) {
	for i := 0; i < len(b); {
		n := gpt2PieceLen(b, i)
		f(b[i : i+n])
		i += n
	}
}

// gpt2PieceLen returns the length of the piece starting at b[i] (> 0).
func gpt2PieceLen(b []byte, i int) int {
	// 's|'t|'re|'ve|'m|'ll|'d
	if b[i] == '\'' && i+1 < len(b) {
		switch b[i+1] {
		case 's', 't', 'm', 'd':
			return 2
		case 'r', 'v':
			if i+2 < len(b) && b[i+2] == 'e' {
				return 3
			}
		case 'l':
			if i+2 < len(b) && b[i+2] == 'l' {
				return 3
			}
		}
	}
	// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`
	j := i
	if b[j] == ' ' && j+1 < len(b) {
		j++
	}
	// When the optional space is followed by white space, the pattern
	// retries without it and the space itself is \s: the same branch.
	cls, size := classAt(b, j)
	if cls != classSpace {
		k := j + size
		for k < len(b) {
			c, s := classAt(b, k)
			if c != cls {
				break
			}
			k += s
		}
		return k - i
	}
	// `\s+(?!\S)|\s+`: the whole run of white space when it ends the text
	// or is one character, else all but its last character (which then
	// prefixes the next piece, or stands alone before a non-space).
	k, last := i, 0
	for k < len(b) {
		c, s := classAt(b, k)
		if c != classSpace {
			break
		}
		k, last = k+s, s
	}
	if k < len(b) && k-last > i {
		return k - last - i
	}
	return k - i
}

// cl100k_base's pattern (OpenAI's GPT-3.5/4 encoding, and Llama 3's
// tokenizer.json Split pattern):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Contractions ignore ASCII case only (the JavaScript references spell
// them out so; Rust's Unicode case folding would also take "'ſ").
const (
	patternGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	patternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitCL100K calls f with each piece of b under cl100k_base's pattern.
func splitCL100K(b []byte, f func(piece []byte)) {
	for i := 0; i < len(b); {
		n := cl100kPieceLen(b, i)
		f(b[i : i+n])
		i += n
	}
}

// run returns the end of the run of characters of class cls from k.
func run(b []byte, k int, cls runeClass) int {
	for k < len(b) {
		c, s := classAt(b, k)
		if c != cls {
			break
		}
		k += s
	}
	return k
}

func lowerASCII(c byte) byte { return c | 0x20 }

// contractionLen is the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at b[i]
// (ASCII case only), 0 if none: cl100k's and o200k's first alternative.
func contractionLen(b []byte, i int) int {
	if i+1 >= len(b) || b[i] != '\'' {
		return 0
	}
	switch lowerASCII(b[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(b) && lowerASCII(b[i+2]) == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(b) && lowerASCII(b[i+2]) == 'l' {
			return 3
		}
	}
	return 0
}

func cl100kPieceLen(b []byte, i int) int {
	c0 := b[i]
	if n := contractionLen(b, i); n > 0 {
		return n
	}
	cls, size := classAt(b, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls == classLetter {
		return run(b, i+size, classLetter) - i
	}
	if cls != classNumber && c0 != '\r' && c0 != '\n' && i+size < len(b) {
		if c, s := classAt(b, i+size); c == classLetter {
			return run(b, i+size+s, classLetter) - i
		}
	}
	// \p{N}{1,3}
	if cls == classNumber {
		k := i + size
		for n := 1; n < 3 && k < len(b); n++ {
			c, s := classAt(b, k)
			if c != classNumber {
				break
			}
			k += s
		}
		return k - i
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if c0 == ' ' && i+1 < len(b) {
		j = i + 1
	}
	if c, s := classAt(b, j); c == classOther {
		k := run(b, j+s, classOther)
		for k < len(b) && (b[k] == '\r' || b[k] == '\n') {
			k++
		}
		return k - i
	}
	// What is left starts with white space. `\s*[\r\n]+`: up to the last
	// CR or LF of the run, if it has one.
	k, last, afterNL := i, 0, -1
	for k < len(b) {
		c, s := classAt(b, k)
		if c != classSpace {
			break
		}
		if b[k] == '\r' || b[k] == '\n' {
			afterNL = k + 1
		}
		k, last = k+s, s
	}
	if afterNL > 0 {
		return afterNL - i
	}
	// `\s+(?!\S)|\s+`
	if k < len(b) && k-last > i {
		return k - last - i
	}
	return k - i
}
