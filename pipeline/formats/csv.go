package formats

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/feedmesh/feedmesh/tensor"
)

// csvBoundaries cuts a CSV file into ranges of at least splitBytes starting
// at record boundaries. Quoted fields may contain newlines, so it scans the
// whole file, tracking quotes. The first split starts at 0 (its reader
// skips the header like every other split's reader does).
func csvBoundaries(f io.ReaderAt, size, splitBytes int64) ([]int64, error) {
	bounds := []int64{0}
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), readBufferBytes)
	inQuote := false
	next := int64(-1) // set once the header has ended
	var pos int64
	for {
		chunk, err := r.ReadSlice('\n')
		for _, c := range chunk {
			if c == '"' {
				inQuote = !inQuote
			}
		}
		pos += int64(len(chunk))
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' && !inQuote {
			switch {
			case next < 0:
				next = pos + splitBytes
			case pos >= next && pos < size:
				bounds = append(bounds, pos)
				next = pos + splitBytes
			}
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				return bounds, nil
			}
			return nil, err
		}
	}
}

type csvColumn struct {
	index  int
	name   string
	tensor string
	dtype  tensor.DType
}

// csvIter reads the CSV records starting in the split's range.
type csvIter struct {
	fr    *fileRange
	r     *csv.Reader
	cols  []csvColumn
	base  int64 // offset where r starts
	empty bool
	slab  slab
	max   int64
}

func newCSVIter(fr *fileRange, o FilesOptions) (Iterator, error) {
	hr := csv.NewReader(bufio.NewReaderSize(io.NewSectionReader(fr.f, 0, fr.size), readBufferBytes))
	hr.Comma = o.Delimiter
	header, err := hr.Read()
	if errors.Is(err, io.EOF) {
		return &csvIter{fr: fr, empty: true}, nil
	}
	if err != nil {
		return nil, csvParseErr(fr, 0, err)
	}
	headerEnd := hr.InputOffset()
	index := make(map[string]int, len(header))
	for i, h := range header {
		if _, dup := index[h]; dup && len(o.Fields) == 0 {
			return nil, &RecordError{Path: fr.path, Line: 1, Offset: -1, Err: ErrBadRecord, Msg: fmt.Sprintf("column %q appears twice in the header", h)}
		}
		if _, dup := index[h]; !dup {
			index[h] = i
		}
	}
	var cols []csvColumn
	if len(o.Fields) == 0 {
		for i, h := range header {
			cols = append(cols, csvColumn{index: i, name: h, tensor: h, dtype: tensor.Bytes})
		}
	}
	for _, f := range o.Fields {
		i, ok := index[f.Name]
		if !ok {
			return nil, &RecordError{Path: fr.path, Line: 1, Offset: -1, Err: ErrBadRecord,
				Msg: fmt.Sprintf("column %q not in header (columns: %s)", f.Name, strings.Join(header, ", "))}
		}
		cols = append(cols, csvColumn{index: i, name: f.Name, tensor: f.tensorName(), dtype: f.DType})
	}
	start := max(fr.start, headerEnd)
	it := &csvIter{fr: fr, cols: cols, base: start, max: o.MaxRecordBytes}
	it.r = csv.NewReader(bufio.NewReaderSize(io.NewSectionReader(fr.f, start, fr.size-start), readBufferBytes))
	it.r.Comma = o.Delimiter
	it.r.FieldsPerRecord = len(header)
	it.r.ReuseRecord = true
	return it, nil
}

// csvParseErr turns a csv.ParseError of a reader starting at base into a
// RecordError with the file's line number.
func csvParseErr(fr *fileRange, base int64, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &RecordError{Path: fr.path, Line: fr.linesBefore(base) + int64(pe.Line), Offset: -1, Err: ErrBadRecord, Msg: pe.Err.Error()}
	}
	return fmt.Errorf("read %s: %w", fr.path, err)
}

func (it *csvIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.empty || it.base+it.r.InputOffset() >= it.fr.end {
		return tensor.Element{}, io.EOF
	}
	before := it.r.InputOffset()
	rec, err := it.r.Read()
	if errors.Is(err, io.EOF) {
		it.empty = true
		return tensor.Element{}, io.EOF
	}
	if err != nil {
		it.empty = true
		return tensor.Element{}, csvParseErr(it.fr, it.base, err)
	}
	if it.r.InputOffset()-before > it.max {
		it.empty = true
		line, _ := it.r.FieldPos(0)
		return tensor.Element{}, &RecordError{Path: it.fr.path, Line: it.fr.linesBefore(it.base) + int64(line), Offset: -1,
			Err: ErrRecordTooLarge, Msg: fmt.Sprintf("record longer than max_record_bytes (%d)", it.max)}
	}
	e := tensor.Element{Tensors: make([]tensor.Tensor, len(it.cols))}
	for k, c := range it.cols {
		v := rec[c.index]
		if c.dtype == tensor.Bytes {
			e.Tensors[k] = tensor.BytesScalar(c.tensor, it.slab.copyString(v))
			continue
		}
		t := tensor.Tensor{Name: c.tensor, DType: c.dtype, Data: it.slab.alloc(c.dtype.Size())}
		if err := PutParsed(t.Data, c.dtype, 0, strings.TrimSpace(v)); err != nil {
			it.empty = true
			line, _ := it.r.FieldPos(c.index)
			return tensor.Element{}, &RecordError{Path: it.fr.path, Line: it.fr.linesBefore(it.base) + int64(line), Offset: -1,
				Err: ErrBadRecord, Msg: fmt.Sprintf("column %q: %v", c.name, err)}
		}
		e.Tensors[k] = t
	}
	return e, nil
}

func (it *csvIter) Close() error { return it.fr.f.Close() }
