package fn

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/tensor"
)

// DefaultVocabSize is tokenize_whitespace's default vocab_size.
const DefaultVocabSize = 32000

// tokenizeWhitespace splits a bytes scalar at Unicode white space and hashes
// each token (FNV-1a, 64 bit) to an id in [0, vocab_size): int32 [n].
func tokenizeWhitespace(a Args) (MapFn, error) {
	in, out, vocab, err := tokenizeArgs(a, DefaultVocabSize)
	if err != nil {
		return nil, argError("tokenize_whitespace", err)
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, in)
		if err != nil {
			return e, err
		}
		text, err := bytesScalar(t)
		if err != nil {
			return e, err
		}
		n := 0
		forEachToken(text, func([]byte) { n++ })
		ids := make([]byte, 0, 4*n)
		forEachToken(text, func(tok []byte) {
			ids = binary.LittleEndian.AppendUint32(ids, uint32(fnv1a(tok)%uint64(vocab)))
		})
		return with(e, tensor.Tensor{Name: out, DType: tensor.Int32, Shape: []int64{int64(n)}, Data: ids}), nil
	}, nil
}

// tokenizeBytes maps every byte b to the id b mod vocab_size (the byte
// itself for the default vocab_size of 256): int32 [len].
func tokenizeBytes(a Args) (MapFn, error) {
	in, out, vocab, err := tokenizeArgs(a, 256)
	if err != nil {
		return nil, argError("tokenize_bytes", err)
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, in)
		if err != nil {
			return e, err
		}
		text, err := bytesScalar(t)
		if err != nil {
			return e, err
		}
		ids := make([]byte, 4*len(text))
		for i, b := range text {
			binary.LittleEndian.PutUint32(ids[4*i:], uint32(int64(b)%vocab))
		}
		return with(e, tensor.Tensor{Name: out, DType: tensor.Int32, Shape: []int64{int64(len(text))}, Data: ids}), nil
	}, nil
}

func tokenizeArgs(a Args, defVocab int64) (in, out string, vocab int64, err error) {
	if in, out, err = textToTokensArgs(a, "vocab_size"); err != nil {
		return
	}
	vocab, err = positiveInt(a, "vocab_size", defVocab, math.MaxInt32)
	return
}

// textToTokensArgs checks a tokenizer's args (tensor and output, plus its
// own known ones) and returns the input tensor ("text") and the output
// tensor ("tokens"): what every tokenize_* function shares.
func textToTokensArgs(a Args, own ...string) (in, out string, err error) {
	if err = a.Known(append([]string{"tensor", "output"}, own...)...); err != nil {
		return
	}
	if in, err = stringArg(a, "tensor", "text"); err != nil {
		return
	}
	out, err = stringArg(a, "output", "tokens")
	return
}

func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// forEachToken calls f with each maximal run of non-space bytes.
func forEachToken(b []byte, f func([]byte)) {
	start := -1
	for i := 0; i < len(b); {
		c := b[i]
		size := 1
		var space bool
		if c < utf8.RuneSelf {
			space = c == ' ' || (c >= '\t' && c <= '\r')
		} else {
			var r rune
			r, size = utf8.DecodeRune(b[i:])
			space = unicode.IsSpace(r)
		}
		if space {
			if start >= 0 {
				f(b[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		f(b[start:])
	}
}

// lengthBetween keeps elements whose tensor's length (first dimension; the
// byte length of a bytes scalar) is in [min, max].
func lengthBetween(a Args) (FilterFn, error) {
	lo, hi, name, err := func() (int64, int64, string, error) {
		if err := a.Known("tensor", "min", "max"); err != nil {
			return 0, 0, "", err
		}
		name, err := stringArg(a, "tensor", "tokens")
		if err != nil {
			return 0, 0, "", err
		}
		lo, err := a.Int("min", 0)
		if err != nil {
			return 0, 0, "", err
		}
		hi, err := a.Int("max", math.MaxInt64)
		if err != nil {
			return 0, 0, "", err
		}
		if lo < 0 {
			return 0, 0, "", fmt.Errorf("min: must be >= 0, got %d", lo)
		}
		if hi < lo {
			return 0, 0, "", fmt.Errorf("max: must be >= min (%d), got %d", lo, hi)
		}
		return lo, hi, name, nil
	}()
	if err != nil {
		return nil, argError("length_between", err)
	}
	return func(_ *FnContext, e tensor.Element) (bool, error) {
		t, err := input(e, name)
		if err != nil {
			return false, err
		}
		n := t.Len()
		return n >= lo && n <= hi, nil
	}, nil
}
