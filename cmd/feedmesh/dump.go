package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/tensor"
)

// dumpHelp is --dump's help text: the format elementWriter writes.
const dumpHelp = "write every element read to `FILE` (\"-\": stdout, and the summary goes to stderr), one JSON object per line: tensor name -> value. " +
	"Batches are split back into their rows. A value is a number or bool for a scalar, nested lists for vectors and matrices; " +
	"bytes are a string if valid UTF-8, else base64; NaN and infinities are the strings \"NaN\", \"+Inf\", \"-Inf\". " +
	"With padded batching (padded_batch, bucket_by_sequence_length) a padded tensor is cut to its row's <name>_length, which is left out"

// elementWriter writes a job's elements as JSON lines (read --dump).
type elementWriter struct {
	w    *bufio.Writer
	f    *os.File // nil: stdout, neither synced nor closed
	path string
	// batched: the spec batches, so a batch's tensors have a leading
	// dimension to split; padded: it pads, so "<name>_length" companions
	// cut their tensors' rows and are left out.
	batched, padded bool
	elements        int64
	line            []byte
}

// openDump opens path for --dump ("-": stdout).
func openDump(path string, spec *pipeline.Spec, stdout io.Writer) (*elementWriter, error) {
	d := &elementWriter{path: path, batched: spec.Batched(), padded: pads(spec)}
	if path == "-" {
		d.w = bufio.NewWriterSize(stdout, 1<<16)
		return d, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--dump: %w", err)
	}
	d.f, d.w = f, bufio.NewWriterSize(f, 1<<16)
	return d, nil
}

// pads reports whether spec assembles padded batches.
func pads(spec *pipeline.Spec) bool {
	for _, o := range spec.Ops {
		if o.PaddedBatch != nil || o.BucketBySequenceLength != nil {
			return true
		}
	}
	return false
}

// close flushes the dump and, for a file, syncs and closes it.
func (d *elementWriter) close() error {
	err := d.w.Flush()
	if d.f != nil {
		if err == nil {
			err = d.f.Sync()
		}
		if cerr := d.f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("--dump %s: %w", d.path, err)
	}
	return nil
}

// discard closes the dump and removes its file: nothing was read into it.
func (d *elementWriter) discard() {
	if d.f != nil {
		d.f.Close()
		os.Remove(d.path)
	}
}

// column is one tensor of a batch as written: lengths (padded tensors of
// rank >= 2) cut each row's first dimension.
type column struct {
	t       *tensor.Tensor
	key     []byte
	lengths []byte // int32 little endian, one per row; nil: whole rows
}

// write writes the elements of batch e.
func (d *elementWriter) write(e tensor.Element) error {
	rows := int64(1)
	if d.batched {
		if len(e.Tensors) == 0 {
			return nil
		}
		rows = -1
		for i := range e.Tensors {
			t := &e.Tensors[i]
			if len(t.Shape) == 0 || (rows >= 0 && t.Shape[0] != rows) {
				return fmt.Errorf("--dump: tensor %q of shape %v is not a batch of %d rows", t.Name, t.Shape, rows)
			}
			rows = t.Shape[0]
		}
	}
	skip := map[string]bool{}
	cols := make([]column, 0, len(e.Tensors))
	for i := range e.Tensors {
		t := &e.Tensors[i]
		if err := t.Validate(); err != nil {
			return fmt.Errorf("--dump: %w", err)
		}
		c := column{t: t, key: appendJSONString(nil, t.Name)}
		if d.batched && d.padded {
			if lt, ok := e.Get(tensor.LengthsName(t.Name)); ok && lt.DType == tensor.Int32 && len(lt.Shape) == 1 && lt.Shape[0] == rows {
				skip[lt.Name] = true
				if len(t.Shape) >= 2 {
					c.lengths = lt.Data
					for r := range rows {
						if n := int64(int32(binary.LittleEndian.Uint32(lt.Data[4*r:]))); n < 0 || n > t.Shape[1] {
							return fmt.Errorf("--dump: %s row %d is %d long, outside [0, %d]", lt.Name, r, n, t.Shape[1])
						}
					}
				}
			}
		}
		cols = append(cols, c)
	}
	for r := range rows {
		b := append(d.line[:0], '{')
		first := true
		for _, c := range cols {
			if skip[c.t.Name] {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(append(b, c.key...), ':')
			shape := c.t.Shape
			start := int64(0)
			if d.batched {
				shape = shape[1:]
				start = r * product(shape)
				if c.lengths != nil {
					shape = append([]int64{int64(int32(binary.LittleEndian.Uint32(c.lengths[4*r:])))}, shape[1:]...)
				}
			}
			b = appendValue(b, c.t, shape, start)
		}
		b = append(b, '}', '\n')
		d.line = b
		if _, err := d.w.Write(b); err != nil {
			return fmt.Errorf("--dump %s: %w", d.path, err)
		}
		d.elements++
	}
	return nil
}

func product(shape []int64) int64 {
	n := int64(1)
	for _, x := range shape {
		n *= x
	}
	return n
}

// appendValue appends the values of t from index start on, of the given
// shape, as a JSON value: a scalar, or nested lists.
func appendValue(b []byte, t *tensor.Tensor, shape []int64, start int64) []byte {
	if len(shape) == 0 {
		return appendScalar(b, t, int(start))
	}
	stride := product(shape[1:])
	b = append(b, '[')
	for i := range shape[0] {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendValue(b, t, shape[1:], start+i*stride)
	}
	return append(b, ']')
}

func appendScalar(b []byte, t *tensor.Tensor, i int) []byte {
	d := t.Data
	switch t.DType {
	case tensor.Bytes:
		v := t.Entry(i)
		if utf8.Valid(v) {
			return appendJSONString(b, string(v))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, '"')
	case tensor.Bool:
		return strconv.AppendBool(b, d[i] != 0)
	case tensor.Uint8:
		return strconv.AppendUint(b, uint64(d[i]), 10)
	case tensor.Int8:
		return strconv.AppendInt(b, int64(int8(d[i])), 10)
	case tensor.Int32:
		return strconv.AppendInt(b, int64(int32(binary.LittleEndian.Uint32(d[4*i:]))), 10)
	case tensor.Int64:
		return strconv.AppendInt(b, int64(binary.LittleEndian.Uint64(d[8*i:])), 10)
	case tensor.Float64:
		return appendFloat(b, t.Float64At(i), 64)
	default: // float32, float16, bfloat16: exact in float32
		return appendFloat(b, t.Float64At(i), 32)
	}
}

func appendFloat(b []byte, v float64, bits int) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, bits)
}

// appendJSONString appends s as a JSON string (invalid UTF-8 replaced).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
