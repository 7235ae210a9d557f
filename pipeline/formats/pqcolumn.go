package formats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// pqColumn says how one top-level Parquet field becomes a tensor named
// after it. Supported: a primitive field (a scalar), and a list of
// primitives, written the standard way (an optional or required LIST
// group, a repeated group, an optional or required element), the legacy
// two-level way (a LIST group over a repeated primitive) or as a bare
// repeated primitive (a 1-D tensor of any length). Physical types map to
// dtypes: INT32 → int32, INT64 → int64, FLOAT → float32, DOUBLE →
// float64, BOOLEAN → bool, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY → bytes.
type pqColumn struct {
	name  string
	leaf  int // the leaf column's index in a row group's column chunks
	kind  parquet.Kind
	dtype tensor.DType
	list  bool
	// maxDef is the definition level of a present value. For a list,
	// an entry with def < defElem has no element (the list is empty,
	// or null when def < defList); an element is null when def < maxDef.
	maxDef, defList, defElem int
}

func dtypeOfKind(k parquet.Kind) (tensor.DType, bool) {
	switch k {
	case parquet.Boolean:
		return tensor.Bool, true
	case parquet.Int32:
		return tensor.Int32, true
	case parquet.Int64:
		return tensor.Int64, true
	case parquet.Float:
		return tensor.Float32, true
	case parquet.Double:
		return tensor.Float64, true
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return tensor.Bytes, true
	}
	return 0, false
}

// encodingKind is the kind of a page's values for a physical type.
func encodingKind(k parquet.Kind) encoding.Kind {
	switch k {
	case parquet.Boolean:
		return encoding.Boolean
	case parquet.Int32:
		return encoding.Int32
	case parquet.Int64:
		return encoding.Int64
	case parquet.Float:
		return encoding.Float
	case parquet.Double:
		return encoding.Double
	case parquet.ByteArray:
		return encoding.ByteArray
	case parquet.FixedLenByteArray:
		return encoding.FixedLenByteArray
	}
	return encoding.Undefined
}

// planColumns resolves the projection (every top-level field when names
// is empty) against the file's schema.
func planColumns(pf *parquet.File, path string, names []string) ([]*pqColumn, error) {
	fields := pf.Root().Columns()
	byName := map[string]*parquet.Column{}
	var all []string
	for _, f := range fields {
		byName[f.Name()] = f
		all = append(all, f.Name())
	}
	if len(names) == 0 {
		names = all
	}
	var out []*pqColumn
	for _, n := range names {
		f, ok := byName[n]
		if !ok {
			sort.Strings(all)
			return nil, &RecordError{Path: path, Offset: -1, Err: ErrBadRecord,
				Msg: fmt.Sprintf("column %q is not in the file (it has: %s)", n, strings.Join(all, ", "))}
		}
		c, err := planColumn(f)
		if err != nil {
			return nil, &RecordError{Path: path, Offset: -1, Err: ErrBadRecord, Msg: fmt.Sprintf("column %q: %v", n, err)}
		}
		out = append(out, c)
	}
	return out, nil
}

func planColumn(f *parquet.Column) (*pqColumn, error) {
	c := &pqColumn{name: f.Name()}
	leaf := f
	switch {
	case f.Leaf() && !f.Repeated():
	case f.Leaf(): // a bare repeated primitive
		c.list, c.defList, c.defElem = true, 0, 1
	default:
		kids := f.Columns()
		if len(kids) != 1 || !kids[0].Repeated() {
			return nil, errors.New("a group that is not a list; only primitives and lists of primitives are read (project other columns with columns:)")
		}
		rep := kids[0]
		leaf = rep
		if !rep.Leaf() {
			inner := rep.Columns()
			if len(inner) != 1 || !inner[0].Leaf() || inner[0].Repeated() {
				return nil, errors.New("a list of groups or of lists; only lists of primitives are read")
			}
			leaf = inner[0]
		}
		c.list = true
		if f.Optional() {
			c.defList = 1
		}
		c.defElem = c.defList + 1
	}
	if leaf.MaxRepetitionLevel() > 1 {
		return nil, errors.New("nested repetition; only lists of primitives are read")
	}
	c.leaf, c.maxDef = leaf.Index(), leaf.MaxDefinitionLevel()
	c.kind = leaf.Type().Kind()
	dt, ok := dtypeOfKind(c.kind)
	if !ok {
		return nil, fmt.Errorf("physical type %v is not read (INT96 timestamps: cast them when writing)", c.kind)
	}
	c.dtype = dt
	return c, nil
}

// pqValues are a page's dense values (or its dictionary's).
type pqValues struct {
	kind encoding.Kind
	i32  []int32
	i64  []int64
	f32  []float32
	f64  []float64
	bits []byte
	data []byte
	offs []uint32
	size int // fixed-length byte arrays
	n    int
}

func valuesOf(v encoding.Values) (pqValues, error) {
	p := pqValues{kind: v.Kind()}
	switch p.kind {
	case encoding.Boolean:
		p.bits = v.Boolean()
		p.n = 8 * len(p.bits)
	case encoding.Int32:
		p.i32 = v.Int32()
		p.n = len(p.i32)
	case encoding.Int64:
		p.i64 = v.Int64()
		p.n = len(p.i64)
	case encoding.Float:
		p.f32 = v.Float()
		p.n = len(p.f32)
	case encoding.Double:
		p.f64 = v.Double()
		p.n = len(p.f64)
	case encoding.ByteArray:
		p.data, p.offs = v.ByteArray()
		p.n = max(len(p.offs)-1, 0)
		if p.n > 0 && (p.offs[0] > p.offs[p.n] || int(p.offs[p.n]) > len(p.data)) {
			return p, errors.New("byte array offsets outside the page")
		}
	case encoding.FixedLenByteArray:
		p.data, p.size = v.FixedLenByteArray()
		if p.size > 0 {
			p.n = len(p.data) / p.size
		}
	default:
		return p, fmt.Errorf("values of kind %v", p.kind)
	}
	return p, nil
}

// appendValue appends value i, little-endian (bytes: its contents).
func (p *pqValues) appendValue(dst []byte, i int) ([]byte, error) {
	if i < 0 || i >= p.n {
		return dst, fmt.Errorf("value %d of a page holding %d", i, p.n)
	}
	switch p.kind {
	case encoding.Boolean:
		return append(dst, p.bits[i>>3]>>(i&7)&1), nil
	case encoding.Int32:
		return binary.LittleEndian.AppendUint32(dst, uint32(p.i32[i])), nil
	case encoding.Int64:
		return binary.LittleEndian.AppendUint64(dst, uint64(p.i64[i])), nil
	case encoding.Float:
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(p.f32[i])), nil
	case encoding.Double:
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.f64[i])), nil
	case encoding.ByteArray:
		a, b := p.offs[i], p.offs[i+1]
		if a > b || int(b) > len(p.data) {
			return dst, fmt.Errorf("byte array value %d at [%d, %d) outside the page's %d bytes", i, a, b, len(p.data))
		}
		return append(dst, p.data[a:b]...), nil
	default:
		return append(dst, p.data[i*p.size:(i+1)*p.size]...), nil
	}
}

// pqCursor walks one column chunk's pages, a row at a time.
type pqCursor struct {
	col   *pqColumn
	path  string
	pages parquet.Pages
	page  parquet.Page

	defs, reps []byte
	n, li      int // levels in the page; the next one
	vals       pqValues
	dict       *pqValues // when the page holds dictionary indexes
	idx        []int32
	vi         int // the next value

	scratch []byte
	offs    []int64
}

func (c *pqCursor) corrupt(format string, args ...any) error {
	return &RecordError{Path: c.path, Offset: -1, Err: ErrCorruptFile,
		Msg: fmt.Sprintf("column %q: ", c.col.name) + fmt.Sprintf(format, args...)}
}

// load makes sure a level is ready to read; io.EOF at the chunk's end.
func (c *pqCursor) load() error {
	for c.li >= c.n {
		if c.page != nil {
			parquet.Release(c.page)
			c.page = nil
		}
		p, err := c.pages.ReadPage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			var named *objstore.NamedError
			if errors.As(err, &named) {
				return err // the object store's, not the file's
			}
			return c.corrupt("page: %v", err)
		}
		c.page = p
		if err := c.setPage(p); err != nil {
			return err
		}
	}
	return nil
}

func (c *pqCursor) setPage(p parquet.Page) error {
	c.n, c.li, c.vi = int(p.NumValues()), 0, 0
	c.defs, c.reps = p.DefinitionLevels(), p.RepetitionLevels()
	if c.n < 0 || (c.col.maxDef > 0 && len(c.defs) < c.n) || (c.col.list && len(c.reps) < c.n) {
		return c.corrupt("page of %d values has %d definition and %d repetition levels", c.n, len(c.defs), len(c.reps))
	}
	c.dict, c.idx = nil, nil
	if d := p.Dictionary(); d != nil {
		dv, err := valuesOf(d.Page().Data())
		if err != nil {
			return c.corrupt("dictionary: %v", err)
		}
		c.dict = &dv
		iv := p.Data()
		if iv.Kind() != encoding.Int32 {
			return c.corrupt("dictionary-encoded page without indexes")
		}
		c.idx = iv.Int32()
		return nil
	}
	v, err := valuesOf(p.Data())
	if err != nil {
		return c.corrupt("%v", err)
	}
	if v.kind != encodingKind(c.col.kind) {
		return c.corrupt("page of %v values in a column of %v", v.kind, c.col.kind)
	}
	c.vals = v
	return nil
}

func (c *pqCursor) appendValue(dst []byte) ([]byte, error) {
	i := c.vi
	c.vi++
	if c.dict != nil {
		if i >= len(c.idx) {
			return dst, c.corrupt("more values defined than the page holds (%d)", len(c.idx))
		}
		j := c.idx[i]
		if j < 0 || int(j) >= c.dict.n {
			return dst, c.corrupt("dictionary index %d of %d entries", j, c.dict.n)
		}
		return c.dict.appendValue(dst, int(j))
	}
	b, err := c.vals.appendValue(dst, i)
	if err != nil {
		return dst, c.corrupt("%v", err)
	}
	return b, nil
}

func (c *pqCursor) def() int {
	if c.col.maxDef == 0 {
		return 0
	}
	return int(c.defs[c.li])
}

// next reads the column's value in the next row: a scalar, or a 1-D
// tensor for a list. null says a null was met (the list, a scalar or an
// element); with zero, nulls are read as zeros (empty bytes, an empty
// list) and null is false.
func (c *pqCursor) next(s *slab, zero bool) (tensor.Tensor, bool, error) {
	if err := c.load(); err != nil {
		if errors.Is(err, io.EOF) {
			return tensor.Tensor{}, false, c.corrupt("fewer values than the row group has rows")
		}
		return tensor.Tensor{}, false, err
	}
	if !c.col.list {
		return c.scalar(s, zero)
	}
	return c.listRow(s, zero)
}

func (c *pqCursor) scalar(s *slab, zero bool) (tensor.Tensor, bool, error) {
	col := c.col
	d := c.def()
	if d > col.maxDef {
		return tensor.Tensor{}, false, c.corrupt("definition level %d above the column's %d", d, col.maxDef)
	}
	c.li++
	c.scratch = c.scratch[:0]
	null := d < col.maxDef
	if null {
		if col.dtype != tensor.Bytes {
			c.scratch = append(c.scratch, make([]byte, col.dtype.Size())...)
		}
	} else {
		var err error
		if c.scratch, err = c.appendValue(c.scratch); err != nil {
			return tensor.Tensor{}, false, err
		}
	}
	t := tensor.Tensor{Name: col.name, DType: col.dtype, Data: s.copy(c.scratch)}
	if col.dtype == tensor.Bytes {
		t.Offsets = []int64{0, int64(len(c.scratch))}
	}
	return t, null && !zero, nil
}

func (c *pqCursor) listRow(s *slab, zero bool) (tensor.Tensor, bool, error) {
	col := c.col
	isBytes := col.dtype == tensor.Bytes
	c.scratch, c.offs = c.scratch[:0], append(c.offs[:0], 0)
	count, null := int64(0), false
	for first := true; ; first = false {
		if !first {
			if err := c.load(); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return tensor.Tensor{}, false, err
			}
		}
		rep := c.reps[c.li]
		if first != (rep == 0) {
			if first {
				return tensor.Tensor{}, false, c.corrupt("a row starts at repetition level %d", rep)
			}
			break // the next row
		}
		d := c.def()
		c.li++
		switch {
		case d > col.maxDef:
			return tensor.Tensor{}, false, c.corrupt("definition level %d above the column's %d", d, col.maxDef)
		case d < col.defElem:
			if !first {
				return tensor.Tensor{}, false, c.corrupt("an empty entry inside a list")
			}
			null = d < col.defList
			continue
		case d < col.maxDef: // a null element
			null = true
			if !isBytes {
				c.scratch = append(c.scratch, make([]byte, col.dtype.Size())...)
			}
		default:
			var err error
			if c.scratch, err = c.appendValue(c.scratch); err != nil {
				return tensor.Tensor{}, false, err
			}
		}
		count++
		if isBytes {
			c.offs = append(c.offs, int64(len(c.scratch)))
		}
	}
	t := tensor.Tensor{Name: col.name, DType: col.dtype, Shape: []int64{count}, Data: s.copy(c.scratch)}
	if isBytes {
		t.Offsets = append([]int64(nil), c.offs...)
	}
	return t, null && !zero, nil
}

func (c *pqCursor) close() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.pages.Close()
}
