package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

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

// ExpandPaths expands the globs: sorted, deduplicated regular files. A glob
// that matches no file is an error naming it (errors.Is ErrNoMatch). It
// reads as the process may (objstore.Local).
func ExpandPaths(globs []string) ([]string, error) {
	return expandPaths(context.Background(), objstore.Local(), objstore.Config{}, globs)
}

// expandPaths is ExpandPaths for local globs and object URLs, through the
// data-access policy acc (object globs are expanded by the store's
// listing; cfg says how to read objects).
func expandPaths(ctx context.Context, acc *objstore.Access, cfg objstore.Config, globs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for i, g := range globs {
		if objstore.IsRemote(g) {
			matches, err := acc.Glob(ctx, g, cfg)
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
		matches, err := acc.Glob(ctx, g, cfg)
		if err != nil {
			if errors.Is(err, objstore.ErrNotAllowed) {
				return nil, fmt.Errorf("paths[%d]: %w", i, err)
			}
			return nil, fmt.Errorf("paths[%d]: bad pattern %q: %w", i, g, err)
		}
		n := 0
		for _, m := range matches {
			st, err := acc.Stat(m)
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
	acc := o.access()
	paths, err := expandPaths(context.Background(), acc, o.Store, o.Paths)
	if err != nil {
		return nil, fmt.Errorf("files source: %w", err)
	}
	if o.Format == FormatParquet {
		out, err := parquetSplits(context.Background(), acc, o, paths)
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
		bounds, err := splitBoundaries(acc, o, p)
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
func splitBoundaries(acc *objstore.Access, o FilesOptions, path string) ([]int64, error) {
	f, err := acc.Open(context.Background(), path, o.Store)
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
	f, err := o.access().Open(ctx, s.Path, o.Store)
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
