package formats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// Parquet files are read with parquet-go (github.com/parquet-go/parquet-go),
// page by page: each page's definition and repetition levels and its
// dense values are turned into tensors here (pqcolumn.go), one row at a
// time, all projected columns in step. Each row group is a split
// (Split.Start and End are row-group indices, [Start, End)).

// What a null does, for OnNull.
const (
	OnNullFail = "fail"
	OnNullSkip = "skip"
	OnNullZero = "zero"
)

// ErrCorruptFile: a Parquet file's footer or pages cannot be decoded.
var ErrCorruptFile = errors.New("corrupt parquet file")

func validateParquetOptions(o FilesOptions) error {
	switch o.OnNull {
	case "", OnNullFail, OnNullSkip, OnNullZero:
	default:
		return fmt.Errorf("on_null: %q is not fail, skip or zero", o.OnNull)
	}
	seen := map[string]bool{}
	for i, c := range o.Columns {
		if c == "" {
			return fmt.Errorf("columns[%d]: empty", i)
		}
		if seen[c] {
			return fmt.Errorf("columns[%d]: %q given twice", i, c)
		}
		seen[c] = true
	}
	return nil
}

// guard runs a call into the Parquet library, turning a panic on corrupt
// input into an error naming the file: parquet-go indexes slices with
// lengths read from the file in places, and a corrupt file must not stop
// the node.
func guard(path string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &RecordError{Path: path, Offset: -1, Err: ErrCorruptFile, Msg: fmt.Sprintf("corrupt parquet file: the decoder failed: %v", r)}
		}
	}()
	return f()
}

// MaxParquetFooterBytes bounds a Parquet file's footer (its metadata):
// the length is read from the file, and parquet-go would allocate it
// whole, up to 4 GiB for a corrupt one. Real footers are KiB to a few MiB.
const MaxParquetFooterBytes = 64 << 20

// checkParquetTail checks the file's last 8 bytes (footer length and
// magic) before parquet-go trusts them.
func checkParquetTail(f io.ReaderAt, size int64, path string) error {
	corrupt := func(format string, args ...any) error {
		return &RecordError{Path: path, Offset: max(size-8, 0), Err: ErrCorruptFile, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 12 {
		return corrupt("%d bytes: too short to be a parquet file (magic, footer, length, magic)", size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil && !errors.Is(err, io.EOF) {
		var named *objstore.NamedError
		if errors.As(err, &named) {
			return err
		}
		return corrupt("read the footer length: %v", err)
	}
	switch string(tail[4:]) {
	case "PAR1":
	case "PARE":
		return corrupt("an encrypted footer (PARE): encrypted parquet files are not read")
	default:
		return corrupt("no PAR1 magic at the end (%q): not a parquet file, or a truncated one", tail[4:])
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return corrupt("the footer length %d exceeds the file's %d bytes: truncated or corrupt footer", n, size)
	}
	if n > MaxParquetFooterBytes {
		return corrupt("a footer of %d bytes, over the bound of %d: corrupt footer", n, MaxParquetFooterBytes)
	}
	footer := make([]byte, n)
	if _, err := f.ReadAt(footer, size-8-n); err != nil && !errors.Is(err, io.EOF) {
		var named *objstore.NamedError
		if errors.As(err, &named) {
			return err
		}
		return corrupt("read the footer: %v", err)
	}
	if _, err := checkThrift(footer); err != nil {
		return &RecordError{Path: path, Offset: size - 8 - n, Err: ErrCorruptFile, Msg: fmt.Sprintf("corrupt footer (file metadata): %v", err)}
	}
	return nil
}

// openParquet decodes a file's footer.
func openParquet(f io.ReaderAt, size int64, path string) (*parquet.File, error) {
	if err := checkParquetTail(f, size, path); err != nil {
		return nil, err
	}
	var pf *parquet.File
	// The leading magic is not read: checkParquetTail checked the
	// trailing one, and for a remote file it would cost a request.
	err := guard(path, func() error {
		var err error
		pf, err = parquet.OpenFile(f, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.SkipMagicBytes(true))
		return err
	})
	if err != nil {
		var re *RecordError
		var named *objstore.NamedError
		if errors.As(err, &re) || errors.As(err, &named) {
			return nil, err // a corrupt page, or the object store's error (not the file's)
		}
		return nil, &RecordError{Path: path, Offset: -1, Err: ErrCorruptFile, Msg: fmt.Sprintf("not a readable parquet file (corrupt or truncated footer?): %v", err)}
	}
	return pf, nil
}

// parquetSplits opens each file's footer and makes a split of each row
// group, checking the projection against every file's schema. With
// SkipCorrupt a file whose footer is corrupt gets one empty split, whose
// reader counts the file as skipped. Footers are read concurrently, up to
// the store's MaxConcurrentReads at once: a job over thousands of shards
// in object storage would otherwise wait for thousands of round trips in
// turn before its first split.
func parquetSplits(ctx context.Context, acc *objstore.Access, o FilesOptions, paths []string) ([]Split, error) {
	groups := make([]int, len(paths)) // row groups per file; -1: a corrupt footer skipped
	errs := make([]error, len(paths))
	sem := make(chan struct{}, o.Store.WithDefaults().MaxConcurrentReads)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			groups[i], errs[i] = parquetRowGroups(ctx, acc, o, p)
		}()
	}
	wg.Wait()
	var out []Split
	for i, p := range paths {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if groups[i] < 0 {
			out = append(out, Split{ID: int64(len(out)), Path: p, Start: 0, End: 0})
			continue
		}
		for g := range groups[i] {
			out = append(out, Split{ID: int64(len(out)), Path: p, Start: int64(g), End: int64(g) + 1})
		}
	}
	return out, nil
}

// parquetRowGroups reads one file's footer: its number of row groups, or
// -1 for a corrupt footer that SkipCorrupt skips.
func parquetRowGroups(ctx context.Context, acc *objstore.Access, o FilesOptions, p string) (int, error) {
	f, err := acc.Open(ctx, p, o.Store)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := footerReader(ctx, f, p)
	if err != nil {
		return 0, err
	}
	pf, err := openParquet(r, f.Size(), p)
	if err == nil {
		_, err = planColumns(pf, p, o.Columns)
	}
	if err != nil {
		if o.SkipCorrupt && errors.Is(err, ErrCorruptFile) {
			return -1, nil
		}
		return 0, err
	}
	return len(pf.RowGroups()), nil
}

type parquetIter struct {
	f       objstore.File
	sw      *switchReader
	path    string
	pf      *parquet.File
	cols    []*pqColumn
	onNull  string
	skip    bool
	max     int64
	groups  []int // row groups left to read, in order
	group   int   // the row group being read, -1 before the first
	rows    int64 // rows of the group
	row     int64 // next row of the group
	curs    []*pqCursor
	skipped int64
	slab    slab
	done    bool
}

func newParquetIter(ctx context.Context, f objstore.File, s Split, o FilesOptions) (Iterator, error) {
	it := &parquetIter{f: f, path: s.Path, onNull: o.OnNull, skip: o.SkipCorrupt, max: o.MaxRecordBytes, group: -1}
	if it.onNull == "" {
		it.onNull = OnNullFail
	}
	r, err := footerReader(ctx, f, s.Path)
	if err != nil {
		return nil, err
	}
	it.sw = &switchReader{cur: r}
	pf, err := openParquet(it.sw, f.Size(), s.Path)
	if err != nil {
		if o.SkipCorrupt && errors.Is(err, ErrCorruptFile) {
			it.skipped = 1 // the file
			it.done = true
			return it, nil
		}
		return nil, err
	}
	it.pf = pf
	if s.Start < 0 || s.End < s.Start || s.End > int64(len(pf.RowGroups())) {
		return nil, fmt.Errorf("files source: %s: split %d: row groups [%d, %d) not in the file's %d", s.Path, s.ID, s.Start, s.End, len(pf.RowGroups()))
	}
	if it.cols, err = planColumns(pf, s.Path, o.Columns); err != nil {
		return nil, err
	}
	for g := s.Start; g < s.End; g++ {
		it.groups = append(it.groups, int(g))
	}
	return it, nil
}

// Skipped counts what skip_corrupt and on_null: skip dropped: rows with a
// null, the rows left in a row group whose pages are corrupt, and whole
// files whose footer is.
func (it *parquetIter) Skipped() int64 { return it.skipped }

func (it *parquetIter) Next(ctx context.Context) (tensor.Element, error) {
	for {
		if err := ctx.Err(); err != nil {
			return tensor.Element{}, err
		}
		if it.done {
			return tensor.Element{}, io.EOF
		}
		if it.group < 0 || it.row >= it.rows {
			if err := it.nextGroup(ctx); err != nil {
				if it.skip && errors.Is(err, ErrCorruptFile) {
					it.skipped += it.rows // the whole row group
					it.row = it.rows
					continue
				}
				if errors.Is(err, io.EOF) {
					it.done = true
				}
				return tensor.Element{}, err
			}
			continue
		}
		el, null, err := it.readRow()
		if err != nil {
			if it.skip && errors.Is(err, ErrCorruptFile) {
				it.skipped += it.rows - it.row
				it.row = it.rows
				continue
			}
			it.done = true
			return tensor.Element{}, err
		}
		it.row++
		if null != "" {
			switch it.onNull {
			case OnNullSkip:
				it.skipped++
				continue
			case OnNullFail:
				it.done = true
				return tensor.Element{}, it.recErr(ErrBadRecord, "row %d: column %q is null (on_null: fail; use skip or zero to read it)", it.row-1, null)
			}
		}
		if it.max > 0 {
			if n := el.ByteSize(); int64(n) > it.max {
				it.done = true
				return tensor.Element{}, it.recErr(ErrRecordTooLarge, "row %d: %d bytes exceed max_record_bytes (%d)", it.row-1, n, it.max)
			}
		}
		return el, nil
	}
}

func (it *parquetIter) recErr(sentinel error, format string, args ...any) error {
	return &RecordError{Path: it.path, Offset: -1, Err: sentinel,
		Msg: fmt.Sprintf("row group %d: ", it.group) + fmt.Sprintf(format, args...)}
}

// nextGroup opens the next row group's column chunks. For a remote file
// it first reads the projected column chunks whole, concurrently, since
// the columns are then decoded in step.
func (it *parquetIter) nextGroup(ctx context.Context) error {
	it.closeCursors()
	if len(it.groups) == 0 {
		return io.EOF
	}
	it.group, it.groups = it.groups[0], it.groups[1:]
	rg := it.pf.RowGroups()[it.group]
	it.rows, it.row = rg.NumRows(), 0
	chunks := rg.ColumnChunks()
	meta := it.pf.Metadata().RowGroups[it.group].Columns
	it.sw.cur = it.f
	if rr, ok := it.f.(objstore.RangeReader); ok {
		var rs []objstore.Range
		for _, c := range it.cols {
			if c.leaf >= len(meta) {
				return it.recErr(ErrCorruptFile, "no column chunk %d", c.leaf)
			}
			md := meta[c.leaf].MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
				start = md.DictionaryPageOffset
			}
			if start < 0 || md.TotalCompressedSize < 0 || start+md.TotalCompressedSize > it.f.Size() {
				return it.recErr(ErrCorruptFile, "column %q: chunk [%d, +%d) outside the file", c.name, start, md.TotalCompressedSize)
			}
			rs = append(rs, objstore.Range{Off: start, N: md.TotalCompressedSize})
		}
		bufs, err := rr.ReadRanges(ctx, rs)
		if err != nil {
			return err
		}
		it.sw.cur = &bufferedRanges{f: it.f, rs: rs, bufs: bufs}
	}
	for _, c := range it.cols {
		if c.leaf >= len(chunks) || c.leaf >= len(meta) {
			return it.recErr(ErrCorruptFile, "no column chunk %d", c.leaf)
		}
		if at, err := checkChunkPages(it.sw.cur, &meta[c.leaf].MetaData, it.f.Size()); err != nil {
			var named *objstore.NamedError
			if errors.As(err, &named) {
				return err
			}
			return &RecordError{Path: it.path, Offset: at, Err: ErrCorruptFile,
				Msg: fmt.Sprintf("row group %d: column %q: %v", it.group, c.name, err)}
		}
		var pages parquet.Pages
		if err := guard(it.path, func() error { pages = chunks[c.leaf].Pages(); return nil }); err != nil {
			return err
		}
		it.curs = append(it.curs, &pqCursor{col: c, pages: pages, path: it.path})
	}
	return nil
}

func (it *parquetIter) closeCursors() {
	for _, c := range it.curs {
		c.close()
	}
	it.curs = it.curs[:0]
}

// readRow reads one row of every projected column. null names a column
// that was null in the row (and not zeroed), "" if none.
func (it *parquetIter) readRow() (tensor.Element, string, error) {
	ts := make([]tensor.Tensor, 0, len(it.curs))
	null := ""
	for _, c := range it.curs {
		var t tensor.Tensor
		var isNull bool
		err := guard(it.path, func() error {
			var err error
			t, isNull, err = c.next(&it.slab, it.onNull == OnNullZero)
			return err
		})
		if err != nil {
			var re *RecordError
			if errors.As(err, &re) {
				if re.Msg != "" && !strings.HasPrefix(re.Msg, "row group") {
					re.Msg = fmt.Sprintf("row group %d, row %d: %s", it.group, it.row, re.Msg)
				}
				return tensor.Element{}, "", re
			}
			return tensor.Element{}, "", it.recErr(ErrCorruptFile, "row %d: column %q: %v", it.row, c.col.name, err)
		}
		if isNull && null == "" {
			null = c.col.name
		}
		ts = append(ts, t)
	}
	return tensor.Element{Tensors: ts}, null, nil
}

func (it *parquetIter) Close() error {
	it.closeCursors()
	return it.f.Close()
}

// bufferedRanges serves reads inside byte ranges read ahead from memory,
// and the rest from the file.
type bufferedRanges struct {
	f    io.ReaderAt
	rs   []objstore.Range
	bufs [][]byte
}

func (b *bufferedRanges) ReadAt(p []byte, off int64) (int, error) {
	for i, r := range b.rs {
		if off >= r.Off && off+int64(len(p)) <= r.Off+r.N {
			return copy(p, b.bufs[i][off-r.Off:]), nil
		}
	}
	return b.f.ReadAt(p, off)
}

// switchReader is the reader parquet-go holds: the file, or for a remote
// file, the current row group's column chunks in memory.
type switchReader struct{ cur io.ReaderAt }

func (s *switchReader) ReadAt(p []byte, off int64) (int, error) { return s.cur.ReadAt(p, off) }
