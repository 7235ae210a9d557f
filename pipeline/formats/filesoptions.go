package formats

import (
	"errors"
	"fmt"
	"path/filepath"
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
	// Access is the data-access policy every path and URL goes through;
	// nil reads as the process may (objstore.Local).
	Access *objstore.Access
}

// access is the policy o reads through.
func (o FilesOptions) access() *objstore.Access {
	if o.Access != nil {
		return o.Access
	}
	return objstore.Local()
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
