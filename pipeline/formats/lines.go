package formats

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/tensor"
)

// lineBoundaries cuts a text file into ranges of at least splitBytes, each
// starting at the beginning of a line. It reads only around each cut.
func lineBoundaries(f io.ReaderAt, size, splitBytes int64) ([]int64, error) {
	bounds := []int64{0}
	for t := splitBytes; t < size; t = bounds[len(bounds)-1] + splitBytes {
		b, err := nextLineStart(f, t, size)
		if err != nil {
			return nil, err
		}
		if b >= size {
			break
		}
		bounds = append(bounds, b)
	}
	return bounds, nil
}

// nextLineStart returns the offset of the first line starting at or after
// off (size if there is none).
func nextLineStart(f io.ReaderAt, off, size int64) (int64, error) {
	if off <= 0 {
		return 0, nil
	}
	var buf [4096]byte
	for p := off - 1; p < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-p)], p)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return p + int64(i) + 1, nil
		}
		p += int64(n)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if n == 0 {
			break
		}
	}
	return size, nil
}

// lineIter reads the lines or JSON lines whose first byte lies in the
// split's range.
type lineIter struct {
	fr        *fileRange
	jsonl     bool
	fields    []Field
	max       int64
	onInvalid string // fail, skip, replace, or "" for no UTF-8 check
	r         *bufio.Reader
	pos       int64 // offset of the next line
	lineStart int64 // offset of the line just read
	first     int64 // offset of the split's first line
	lineIdx   int64 // lines read so far in this split
	long      []byte
	slab      slab
	skipped   int64
	replaced  int64
}

func newLineIter(fr *fileRange, o FilesOptions) (Iterator, error) {
	start, err := nextLineStart(fr.f, fr.start, fr.size)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", fr.path, err)
	}
	it := &lineIter{fr: fr, jsonl: o.Format == FormatJSONL, fields: o.Fields, max: o.MaxRecordBytes,
		onInvalid: o.onInvalid(), pos: start, first: start}
	it.r = bufio.NewReaderSize(io.NewSectionReader(fr.f, start, fr.size-start), readBufferBytes)
	return it, nil
}

// errAt builds the error for the line just read.
func (it *lineIter) errAt(sentinel error, format string, args ...any) error {
	line := it.fr.linesBefore(it.first) + it.lineIdx
	return &RecordError{Path: it.fr.path, Line: line, Offset: -1, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

// readLine returns the next line without its terminator; the slice is
// valid until the next call.
func (it *lineIter) readLine() ([]byte, error) {
	b, err := it.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		it.long = append(it.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if int64(len(it.long)) > it.max {
				it.lineIdx++
				return nil, it.errAt(ErrRecordTooLarge, "line longer than max_record_bytes (%d)", it.max)
			}
			b, err = it.r.ReadSlice('\n')
			it.long = append(it.long, b...)
		}
		b = it.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", it.fr.path, err)
	}
	if len(b) == 0 {
		return nil, io.EOF
	}
	it.lineStart = it.pos
	it.pos += int64(len(b))
	it.lineIdx++
	if int64(len(b)) > it.max+1 {
		return nil, it.errAt(ErrRecordTooLarge, "line longer than max_record_bytes (%d)", it.max)
	}
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'}), nil
}

func (it *lineIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	for {
		if it.pos >= it.fr.end {
			return tensor.Element{}, io.EOF
		}
		line, err := it.readLine()
		if err != nil {
			return tensor.Element{}, err
		}
		if it.jsonl && len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		owned := false // line is already a copy the element may keep
		if it.onInvalid != "" && !utf8.Valid(line) {
			switch it.onInvalid {
			case OnInvalidSkip:
				it.skipped++
				continue
			case OnInvalidReplace:
				it.replaced++
				line, owned = it.replace(line), true
			default:
				return tensor.Element{}, it.invalidUTF8(invalidUTF8At(line))
			}
		}
		if it.jsonl {
			return it.jsonElement(line)
		}
		if !owned {
			line = it.slab.copy(line)
		}
		return tensor.Element{Tensors: []tensor.Tensor{tensor.BytesScalar("text", line)}}, nil
	}
}

// replace returns a copy of line with its invalid sequences replaced by
// U+FFFD: at most 3 × max_record_bytes.
func (it *lineIter) replace(line []byte) []byte {
	buf := it.slab.alloc(replacedLen(line))
	return appendReplacingInvalid(buf[:0], line)
}

// invalidUTF8 is the on_invalid: fail error for the line just read, whose
// byte at is where valid UTF-8 stops.
func (it *lineIter) invalidUTF8(at int) error {
	hint := "on_invalid: skip or replace reads past such lines"
	if !it.jsonl {
		hint += ", encoding: bytes reads them as they are"
	}
	return it.errAt(ErrBadRecord, "invalid UTF-8 at byte %d of the line (file offset %d); %s", at, it.lineStart+int64(at), hint)
}

// Skipped is the number of lines dropped so far for invalid UTF-8
// (on_invalid: skip).
func (it *lineIter) Skipped() int64 { return it.skipped }

// Replaced is the number of lines whose invalid UTF-8 was replaced so far
// (on_invalid: replace).
func (it *lineIter) Replaced() int64 { return it.replaced }

func (it *lineIter) jsonElement(line []byte) (tensor.Element, error) {
	if len(it.fields) == 0 {
		if err := checkJSONObject(line); err != nil {
			return tensor.Element{}, it.errAt(ErrBadRecord, "invalid JSON: %v", err)
		}
		return tensor.Element{Tensors: []tensor.Tensor{tensor.BytesScalar("json", it.slab.copy(line))}}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return tensor.Element{}, it.errAt(ErrBadRecord, "invalid JSON: %v", err)
	}
	if obj == nil {
		return tensor.Element{}, it.errAt(ErrBadRecord, "invalid JSON: want an object, got null")
	}
	e := tensor.Element{Tensors: make([]tensor.Tensor, 0, len(it.fields))}
	for _, f := range it.fields {
		raw, ok := obj[f.Name]
		if !ok {
			return tensor.Element{}, it.errAt(ErrBadRecord, "field %q missing", f.Name)
		}
		t, err := JSONTensor(f.tensorName(), raw, f.DType)
		if err != nil {
			return tensor.Element{}, it.errAt(ErrBadRecord, "field %q: %v", f.Name, err)
		}
		e.Tensors = append(e.Tensors, t)
	}
	return e, nil
}

func checkJSONObject(b []byte) error {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		if err == nil {
			err = errors.New("not valid JSON")
		}
		return err
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("want an object")
	}
	return nil
}

func (it *lineIter) Close() error { return it.fr.f.Close() }
