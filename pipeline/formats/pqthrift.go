package formats

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Parquet's footer and page headers are thrift structs (compact
// protocol). parquet-go's decoder allocates every list and string at the
// length the bytes announce before it reads them, so a corrupt length is
// an allocation of gigabytes, which no recover catches. checkThrift walks
// the same bytes first without allocating, refusing any length longer
// than the bytes left, and nesting deeper than maxThriftDepth: what
// parquet-go then allocates is bounded by the size of its input.

const maxThriftDepth = 32

// errThriftShort: the bytes end inside the struct (a header read through
// a window too small may need more).
var errThriftShort = errors.New("thrift struct cut short")

// checkThrift checks one compact-protocol struct at the start of b and
// returns its length in bytes.
func checkThrift(b []byte) (int, error) {
	w := thriftWalker{b: b}
	if err := w.structure(0); err != nil {
		return w.at, err
	}
	return w.at, nil
}

type thriftWalker struct {
	b  []byte
	at int
}

func (w *thriftWalker) byte1() (byte, error) {
	if w.at >= len(w.b) {
		return 0, errThriftShort
	}
	c := w.b[w.at]
	w.at++
	return c, nil
}

func (w *thriftWalker) varint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.at:])
	switch {
	case n == 0:
		return 0, errThriftShort
	case n < 0:
		return 0, fmt.Errorf("thrift varint longer than 64 bits at byte %d", w.at)
	}
	w.at += n
	return v, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.at) {
		return errThriftShort
	}
	w.at += int(n)
	return nil
}

// count reads a list, set or map size: each element takes at least one
// byte, so a size beyond the bytes left is corrupt (or cut short).
func (w *thriftWalker) count(n uint64) (int, error) {
	if n > uint64(len(w.b)-w.at) {
		if n > 1<<31 {
			return 0, fmt.Errorf("thrift collection of %d elements at byte %d", n, w.at)
		}
		return 0, errThriftShort
	}
	return int(n), nil
}

func (w *thriftWalker) structure(depth int) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("thrift structs nested deeper than %d at byte %d", maxThriftDepth, w.at)
	}
	for {
		h, err := w.byte1()
		if err != nil {
			return err
		}
		if h == 0 { // stop
			return nil
		}
		if h>>4 == 0 { // a long-form field id follows
			if _, err := w.varint(); err != nil {
				return err
			}
		}
		if err := w.value(h&0x0f, depth, false); err != nil {
			return err
		}
	}
}

// value skips one value of compact type t. In a collection, booleans take
// a byte; as a struct field, the type holds them.
func (w *thriftWalker) value(t byte, depth int, inCollection bool) error {
	switch t {
	case 1, 2: // bool
		if inCollection {
			_, err := w.byte1()
			return err
		}
		return nil
	case 3: // byte
		_, err := w.byte1()
		return err
	case 4, 5, 6: // i16, i32, i64
		_, err := w.varint()
		return err
	case 7: // double
		return w.skip(8)
	case 8: // binary
		n, err := w.varint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case 9, 10: // list, set
		h, err := w.byte1()
		if err != nil {
			return err
		}
		size := uint64(h >> 4)
		if size == 15 {
			if size, err = w.varint(); err != nil {
				return err
			}
		}
		n, err := w.count(size)
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(h&0x0f, depth+1, true); err != nil {
				return err
			}
		}
		return nil
	case 11: // map
		size, err := w.varint()
		if err != nil {
			return err
		}
		if size == 0 {
			return nil
		}
		kv, err := w.byte1()
		if err != nil {
			return err
		}
		n, err := w.count(size)
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(kv>>4, depth+1, true); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1, true); err != nil {
				return err
			}
		}
		return nil
	case 12: // struct
		return w.structure(depth + 1)
	}
	return fmt.Errorf("thrift type %d at byte %d", t, w.at-1)
}
