package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// File formats understood by the files source.
const (
	FormatLines       = "lines"
	FormatJSONL       = "jsonl"
	FormatCSV         = "csv"
	FormatTFRecord    = "tfrecord"
	FormatWholeFile   = "whole_file"
	FormatWebDataset  = "webdataset"
	FormatImageFolder = "image_folder"
	FormatParquet     = "parquet"
)

// DefaultMaxRecordBytes bounds one line, CSV record, TFRecord record or
// whole file unless FilesOptions.MaxRecordBytes says otherwise.
const DefaultMaxRecordBytes = 64 << 20

// readBufferBytes is the size of each file reader's buffer.
const readBufferBytes = 64 << 10

// Sentinel errors, for errors.Is. Every error of the files source also
// names the file and the line (text formats) or byte offset (tfrecord).
var (
	// ErrNoMatch: a glob in Paths matched no file.
	ErrNoMatch = errors.New("matches no files")
	// ErrCorruptRecord: a TFRecord CRC did not match.
	ErrCorruptRecord = errors.New("corrupt record")
	// ErrTruncatedRecord: a TFRecord file ends inside a record.
	ErrTruncatedRecord = errors.New("truncated record")
	// ErrRecordTooLarge: a record, line or file exceeds MaxRecordBytes.
	ErrRecordTooLarge = errors.New("record exceeds max_record_bytes")
	// ErrBadRecord: a record could not be parsed (invalid UTF-8 or JSON,
	// missing field, a CSV value not of its column's type).
	ErrBadRecord = errors.New("bad record")
)

// RecordError locates a bad record: `path:line: message` for text formats,
// `path: offset N: message` for binary ones.
type RecordError struct {
	Path string
	// Line is the 1-based line number, 0 when not applicable.
	Line int64
	// Offset is the byte offset of the record, -1 when not applicable.
	Offset int64
	// Msg says what is wrong.
	Msg string
	// Err is the sentinel (ErrCorruptRecord, ErrBadRecord, …).
	Err error
}

func (e *RecordError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: offset %d: %s", e.Path, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Unwrap returns the sentinel.
func (e *RecordError) Unwrap() error { return e.Err }

// Field selects a JSON field or CSV column and says how to store it.
type Field struct {
	// Name is the JSON field or CSV column.
	Name string
	// Tensor is the output tensor's name; "" means Name.
	Tensor string
	// DType of the tensor; 0 means bytes. For JSON, a bytes field holds a
	// string's contents or, for any other value, its JSON text; numeric
	// fields accept a number (scalar) or an array of numbers (1-D).
	DType tensor.DType
}

func (f Field) tensorName() string {
	if f.Tensor != "" {
		return f.Tensor
	}
	return f.Name
}

// FilesOptions configure the files source.
//
// Elements per format:
//   - lines: tensor "text" (bytes scalar), one per line without its "\n"
//     or "\r\n"; lines must be UTF-8 unless Encoding is bytes, and
//     OnInvalid says what to do with those that are not.
//   - jsonl: one per non-blank line, holding the selected Fields; with no
//     Fields, tensor "json" (bytes scalar) holds the line, checked to be a
//     JSON object. Lines are checked for UTF-8 only when OnInvalid is set.
//   - csv: one per record after the header row; the selected columns (all
//     as bytes when Fields is empty) become scalar tensors.
//   - tfrecord: tensor "record" (bytes scalar), CRCs verified.
//   - whole_file: tensors "data" (the file's bytes) and "path".
type FilesOptions struct {
	// Paths are globs (filepath.Match syntax), expanded, deduplicated and
	// sorted; a glob matching no file is an error naming it.
	Paths []string
	// Format is lines, jsonl, csv, tfrecord or whole_file.
	Format string
	// Fields: jsonl fields or csv columns and their types.
	Fields []Field
	// Delimiter of csv fields; 0 means ','.
	Delimiter rune
	// SplitBytes > 0 cuts lines, jsonl, csv and tfrecord files into byte
	// ranges of about this size, each starting at a record boundary; 0 gives
	// one split per file. Finding the boundaries reads a few bytes per split
	// (lines, jsonl), every record header (tfrecord) or the whole file
	// (csv, whose quoted fields may contain newlines).
	SplitBytes int64
	// SkipCorrupt makes the tfrecord reader skip corrupt or truncated records
	// and count them (see the Skipped method of its iterator) instead of
	// failing.
	SkipCorrupt bool
	// Encoding of lines and jsonl: "" or EncodingUTF8 (lines must be valid
	// UTF-8), or EncodingBytes (lines only: raw bytes, never checked).
	Encoding string
	// OnInvalid says what a lines or jsonl reader does with a line that is
	// not valid UTF-8: OnInvalidFail, OnInvalidSkip or OnInvalidReplace
	// (skipped and replaced lines are counted: see the Skipped and
	// Replaced methods of its iterator). "" means fail for lines and, for
	// jsonl, no check of its own: the JSON decoder replaces invalid bytes
	// inside strings and a line read without Fields is passed on as is.
	OnInvalid string
	// MaxRecordBytes bounds one line, record or whole file; 0 means
	// DefaultMaxRecordBytes. Larger ones are an error, never an allocation.
	MaxRecordBytes int64
	// Columns (parquet) projects the file on these columns, in this
	// order; empty means every column.
	Columns []string
	// OnNull (parquet) is what a null value does: OnNullFail (the
	// default), OnNullSkip (drop the row, counted as skipped) or
	// OnNullZero (a zero, empty bytes or an empty list in its place).
	OnNull string
	// Store says how to reach paths that are object URLs (s3://,
	// https://) and how hard to read them.
	Store objstore.Config
}

// WithDefaults returns o with zero fields replaced by their defaults.
func (o FilesOptions) WithDefaults() FilesOptions {
	if o.Format == FormatCSV && o.Delimiter == 0 {
		o.Delimiter = ','
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if len(o.Fields) > 0 {
		fs := make([]Field, len(o.Fields))
		for i, f := range o.Fields {
			f.Tensor = f.tensorName()
			if f.DType == 0 {
				f.DType = tensor.Bytes
			}
			fs[i] = f
		}
		o.Fields = fs
	}
	return o
}

// Validate checks the options; messages name the field.
func (o FilesOptions) Validate() error {
	o = o.WithDefaults()
	if len(o.Paths) == 0 {
		return errors.New("paths: at least one path or glob is required")
	}
	for i, p := range o.Paths {
		if p == "" {
			return fmt.Errorf("paths[%d]: empty", i)
		}
		if _, err := filepath.Match(p, ""); err != nil {
			return fmt.Errorf("paths[%d]: bad pattern %q: %w", i, p, err)
		}
		if objstore.IsRemote(p) && o.Format == FormatImageFolder {
			return fmt.Errorf("paths[%d]: image_folder reads a local directory tree, not %s", i, p)
		}
	}
	switch o.Format {
	case FormatLines, FormatTFRecord, FormatWholeFile, FormatWebDataset, FormatImageFolder:
		if len(o.Fields) > 0 {
			return fmt.Errorf("fields: only jsonl and csv take fields, not %s", o.Format)
		}
	case FormatJSONL, FormatCSV:
	case FormatParquet:
		if len(o.Fields) > 0 {
			return errors.New("fields: parquet selects columns with columns, not fields")
		}
		if o.SplitBytes != 0 {
			return errors.New("split_bytes: parquet files are cut at row groups (each row group is a split): leave it out")
		}
	default:
		return fmt.Errorf("format: %q is not lines, jsonl, csv, tfrecord, whole_file, webdataset, image_folder or parquet", o.Format)
	}
	if o.Format != FormatParquet && (len(o.Columns) > 0 || o.OnNull != "") {
		return errors.New("columns, on_null: only parquet takes them")
	}
	if err := validateParquetOptions(o); err != nil {
		return err
	}
	if o.Format == FormatImageFolder {
		if o.SplitBytes != 0 {
			return fmt.Errorf("split_bytes: image_folder cuts every class into splits of %d images: leave it out", ImageFolderSplitSize)
		}
		if len(o.Paths) != 1 {
			return fmt.Errorf("paths: image_folder takes exactly one root directory, got %d paths", len(o.Paths))
		}
	}
	if o.Format == FormatWebDataset && o.SplitBytes != 0 {
		return errors.New("split_bytes: webdataset shards are read whole, front to back (each shard is a split): leave it out")
	}
	names := map[string]bool{}
	for i, f := range o.Fields {
		if f.Name == "" {
			return fmt.Errorf("fields[%d].name: empty", i)
		}
		if !f.DType.Valid() {
			return fmt.Errorf("fields[%d].dtype: invalid dtype %d", i, uint8(f.DType))
		}
		if names[f.Tensor] {
			return fmt.Errorf("fields[%d].tensor: %q used twice", i, f.Tensor)
		}
		names[f.Tensor] = true
	}
	if o.Format == FormatCSV {
		d := o.Delimiter
		if d == '"' || d == '\r' || d == '\n' || d == utf8.RuneError || !utf8.ValidRune(d) {
			return fmt.Errorf("delimiter: %q cannot be a csv delimiter", d)
		}
	}
	if err := o.validateTextEncoding(); err != nil {
		return err
	}
	if o.SplitBytes < 0 {
		return errors.New("split_bytes: must be >= 0 (0: one split per file)")
	}
	if o.MaxRecordBytes < 0 {
		return errors.New("max_record_bytes: must be >= 0")
	}
	return nil
}

// ExpandPaths expands the globs: sorted, deduplicated regular files. A glob
// that matches no file is an error naming it (errors.Is ErrNoMatch).
func ExpandPaths(globs []string) ([]string, error) {
	return expandPaths(context.Background(), nil, globs)
}

// expandPaths is ExpandPaths for local globs and object URLs (listed
// through store; object globs are expanded by the store's listing).
func expandPaths(ctx context.Context, store *objstore.Store, globs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for i, g := range globs {
		if objstore.IsRemote(g) {
			if store == nil {
				return nil, fmt.Errorf("paths[%d]: %s: no object store configured", i, g)
			}
			matches, err := store.Glob(ctx, g)
			if err != nil {
				if errors.Is(err, objstore.ErrNoMatch) {
					return nil, fmt.Errorf("paths[%d]: %q %w", i, g, ErrNoMatch)
				}
				return nil, fmt.Errorf("paths[%d]: %w", i, err)
			}
			for _, m := range matches {
				if !seen[m] {
					seen[m] = true
					out = append(out, m)
				}
			}
			continue
		}
		matches, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("paths[%d]: bad pattern %q: %w", i, g, err)
		}
		n := 0
		for _, m := range matches {
			st, err := os.Stat(m)
			if err != nil {
				return nil, fmt.Errorf("paths[%d]: %w", i, err)
			}
			if st.IsDir() {
				continue
			}
			n++
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("paths[%d]: %q %w", i, g, ErrNoMatch)
		}
	}
	sort.Strings(out)
	return out, nil
}

// FileSplits enumerates the splits of the files source: the expanded files
// in sorted order, each cut into record-aligned byte ranges when SplitBytes
// > 0 (one split per file otherwise, and always for whole_file).
func FileSplits(o FilesOptions) ([]Split, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("files source: %w", err)
	}
	o = o.WithDefaults()
	if o.Format == FormatImageFolder {
		out, err := imageFolderSplits(o)
		if err != nil {
			return nil, fmt.Errorf("files source: %w", err)
		}
		return out, nil
	}
	store := objstore.For(o.Store)
	paths, err := expandPaths(context.Background(), store, o.Paths)
	if err != nil {
		return nil, fmt.Errorf("files source: %w", err)
	}
	if o.Format == FormatParquet {
		out, err := parquetSplits(context.Background(), store, o, paths)
		if err != nil {
			return nil, fmt.Errorf("files source: %w", err)
		}
		return out, nil
	}
	var out []Split
	for _, p := range paths {
		if o.SplitBytes == 0 || o.Format == FormatWholeFile || o.Format == FormatWebDataset {
			out = append(out, Split{ID: int64(len(out)), Path: p, Start: 0, End: -1})
			continue
		}
		bounds, err := splitBoundaries(store, o, p)
		if err != nil {
			return nil, fmt.Errorf("files source: split %s: %w", p, err)
		}
		for i, b := range bounds {
			end := int64(-1)
			if i+1 < len(bounds) {
				end = bounds[i+1]
			}
			out = append(out, Split{ID: int64(len(out)), Path: p, Start: b, End: end})
		}
	}
	return out, nil
}

// splitBoundaries returns the start offsets of a file's splits (the first
// is always 0, so an empty file still has one split).
func splitBoundaries(store *objstore.Store, o FilesOptions, path string) ([]int64, error) {
	f, err := store.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	switch o.Format {
	case FormatTFRecord:
		return tfrecordBoundaries(f, size, o.SplitBytes, o.MaxRecordBytes)
	case FormatCSV:
		return csvBoundaries(f, size, o.SplitBytes)
	}
	return lineBoundaries(f, size, o.SplitBytes)
}

// OpenFiles opens an iterator over one split of the files source. The split
// must come from FileSplits for the same options (for lines and jsonl any
// byte range works: a range starting inside a line skips to the next one).
func OpenFiles(ctx context.Context, o FilesOptions, s Split) (Iterator, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("files source: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o = o.WithDefaults()
	if s.Path == "" {
		return nil, fmt.Errorf("files source: split %d has no path", s.ID)
	}
	if o.Format == FormatImageFolder {
		it, err := openImageFolder(o, s)
		if err != nil {
			return nil, fmt.Errorf("files source: %w", err)
		}
		return it, nil
	}
	if s.Start < 0 || (s.End != -1 && s.End < s.Start) {
		return nil, fmt.Errorf("files source: split %d: bad byte range [%d, %d)", s.ID, s.Start, s.End)
	}
	f, err := objstore.For(o.Store).Open(ctx, s.Path)
	if err != nil {
		return nil, fmt.Errorf("files source: %w", err)
	}
	if o.Format == FormatParquet {
		it, err := newParquetIter(ctx, f, s, o)
		if err != nil {
			f.Close()
			return nil, err // names the file
		}
		return it, nil
	}
	size := f.Size()
	fr := &fileRange{f: f, path: s.Path, size: size, start: min(s.Start, size), end: s.End}
	if fr.end == -1 || fr.end > fr.size {
		fr.end = fr.size
	}
	var it Iterator
	switch o.Format {
	case FormatLines, FormatJSONL:
		it, err = newLineIter(fr, o)
	case FormatCSV:
		it, err = newCSVIter(fr, o)
	case FormatTFRecord:
		it, err = newTFRecordIter(fr, o)
	case FormatWebDataset:
		if fr.start != 0 {
			err = fmt.Errorf("split %d: a webdataset shard is read whole, not from offset %d", s.ID, s.Start)
			break
		}
		it, err = newWebDatasetIter(fr, o)
	default:
		it, err = newWholeFileIter(fr, o)
	}
	if err != nil {
		f.Close()
		var re *RecordError
		if errors.As(err, &re) {
			return nil, err // already names the file and line
		}
		return nil, fmt.Errorf("files source: %w", err)
	}
	return it, nil
}

// fileRange is an open file and the byte range [start, end) of a split.
type fileRange struct {
	f                objstore.File
	path             string
	size, start, end int64
}

// linesBefore counts the newlines in [0, off): the 0-based line number of
// offset off. It is called only to report an error, so it may be slow.
func (fr *fileRange) linesBefore(off int64) int64 {
	buf := make([]byte, readBufferBytes)
	var n int64
	r := io.NewSectionReader(fr.f, 0, off)
	for {
		k, err := r.Read(buf)
		for _, b := range buf[:k] {
			if b == '\n' {
				n++
			}
		}
		if err != nil {
			return n
		}
	}
}

// slab hands out record buffers carved from larger allocations, so reading
// small records costs one allocation per slab rather than per record. Each
// slice is capped at its length so appends never run into a neighbour.
type slab struct{ buf []byte }

const slabBytes = 64 << 10

func (s *slab) copy(b []byte) []byte {
	if len(b) > slabBytes/4 {
		return append([]byte(nil), b...)
	}
	if len(s.buf)+len(b) > cap(s.buf) {
		s.buf = make([]byte, 0, slabBytes)
	}
	n := len(s.buf)
	s.buf = append(s.buf, b...)
	return s.buf[n:len(s.buf):len(s.buf)]
}

type wholeFileIter struct {
	fr   *fileRange
	max  int64
	done bool
}

func newWholeFileIter(fr *fileRange, o FilesOptions) (Iterator, error) {
	return &wholeFileIter{fr: fr, max: o.MaxRecordBytes}, nil
}

func (it *wholeFileIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.done {
		return tensor.Element{}, io.EOF
	}
	it.done = true
	if it.fr.size > it.max {
		return tensor.Element{}, &RecordError{Path: it.fr.path, Offset: -1, Err: ErrRecordTooLarge,
			Msg: fmt.Sprintf("file of %d bytes exceeds max_record_bytes (%d)", it.fr.size, it.max)}
	}
	data := make([]byte, it.fr.size)
	if _, err := io.ReadFull(io.NewSectionReader(it.fr.f, 0, it.fr.size), data); err != nil {
		return tensor.Element{}, fmt.Errorf("read %s: %w", it.fr.path, err)
	}
	return tensor.Element{Tensors: []tensor.Tensor{
		tensor.BytesScalar("data", data),
		tensor.BytesScalar("path", []byte(it.fr.path)),
	}}, nil
}

func (it *wholeFileIter) Close() error { return it.fr.f.Close() }

// alloc returns a zeroed n-byte buffer carved from the slab.
func (s *slab) alloc(n int) []byte {
	if n > slabBytes/4 {
		return make([]byte, n)
	}
	if len(s.buf)+n > cap(s.buf) {
		s.buf = make([]byte, 0, slabBytes)
	}
	k := len(s.buf)
	s.buf = s.buf[:k+n]
	return s.buf[k : k+n : k+n]
}

// copyString is copy for a string.
func (s *slab) copyString(v string) []byte {
	b := s.alloc(len(v))
	copy(b, v)
	return b
}
