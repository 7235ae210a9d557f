package pipeline

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// DefaultSplitSize is the number of elements per split of range and
// synthetic sources when the spec does not say.
const DefaultSplitSize = 1024

// sourceOpener opens one split of a source.
type sourceOpener func(ctx context.Context, s formats.Split) (formats.Iterator, error)

// compiledSource is a validated source in the form the formats package
// takes.
type compiledSource struct {
	kind   string
	splits func() ([]formats.Split, error)
	// index (range and synthetic sources) computes splits on demand
	// (ListSplits); nil for file sources.
	index func() (formats.IndexSplitter, error)
	open  sourceOpener
	// version identifies a split's input as it is now
	// (formats.SplitVersion); nil for sources the spec alone determines
	// (range, synthetic), whose version is "".
	version func(ctx context.Context, s formats.Split) (string, error)
}

func rangeOptions(r *RangeSource) formats.RangeOptions {
	return formats.RangeOptions{Start: r.Start, Stop: r.Stop, Step: r.Step, SplitSize: r.SplitSize}
}

// filesOptions is the files source as the formats package takes it,
// reading through files.
func filesOptions(f *FilesSource, files *objstore.Access) (formats.FilesOptions, error) {
	o := formats.FilesOptions{
		Paths: f.Paths, Format: f.Format, SplitBytes: f.SplitBytes,
		SkipCorrupt: f.SkipCorrupt, MaxRecordBytes: f.MaxRecordBytes,
		Encoding: f.Encoding, OnInvalid: f.OnInvalid,
		Columns: f.Columns, OnNull: f.OnNull,
		Access: files,
	}
	if s := f.ObjectStore; s != nil {
		if err := s.checkNoEndpoint(); err != nil {
			return o, err
		}
		o.Store = objstore.Config{
			Store:              s.Store,
			MaxConcurrentReads: s.MaxConcurrentReads, ChunkBytes: s.ChunkBytes,
			ReadAheadChunks: s.ReadAheadChunks, MaxRetries: s.MaxRetries,
		}
	}
	if f.Delimiter != "" {
		r, size := utf8.DecodeRuneInString(f.Delimiter)
		if size != len(f.Delimiter) || r == utf8.RuneError {
			return o, fmt.Errorf("delimiter: want one character, got %q", f.Delimiter)
		}
		o.Delimiter = r
	}
	for i, fd := range f.Fields {
		ff := formats.Field{Name: fd.Name, Tensor: fd.Tensor}
		if fd.DType != "" {
			dt, err := tensor.ParseDType(fd.DType)
			if err != nil {
				return o, fmt.Errorf("fields[%d].dtype: %w", i, err)
			}
			ff.DType = dt
		}
		o.Fields = append(o.Fields, ff)
	}
	return o, nil
}

// checkNoEndpoint refuses what only a node's operator may say about an
// object store: where it is and how to sign in (the nodes' credentials
// would go wherever a spec said).
func (s *ObjectStoreOptions) checkNoEndpoint() error {
	var set []string
	if s.Endpoint != "" {
		set = append(set, "endpoint")
	}
	if s.Region != "" {
		set = append(set, "region")
	}
	if s.PathStyle {
		set = append(set, "path_style")
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("object_store.%s: a spec does not say where an object store is or how to reach it "+
		"(the nodes would send their credentials there): the operator configures a named store on every node "+
		"(feedmesh node --object-store NAME=endpoint=http://HOST:PORT,region=REGION,path_style=true; run-local takes the same flag) "+
		"and the spec names it: s3://NAME/bucket/key, or object_store: {store: NAME}", strings.Join(set, ", object_store."))
}

func syntheticOptions(s *SyntheticSource) formats.SyntheticOptions {
	return formats.SyntheticOptions{
		Kind: s.Kind, Count: s.Count, Seed: s.Seed, SplitSize: s.SplitSize,
		MinWords: s.MinWords, MaxWords: s.MaxWords, MeanWords: s.MeanWords, TailAlpha: s.TailAlpha,
		Width: s.Width, Height: s.Height, Channels: s.Channels, Encoding: s.Encoding, Classes: s.Classes,
		RecordBytes: s.RecordBytes,
	}
}

// fillSourceDefaults writes the source's defaults into the spec (the
// formats package's defaults, plus DefaultSplitSize), so that the
// fingerprint covers them.
func fillSourceDefaults(src *Source) {
	switch {
	case src.Range != nil:
		if src.Range.SplitSize == 0 {
			src.Range.SplitSize = DefaultSplitSize
		}
		o := rangeOptions(src.Range).WithDefaults()
		src.Range.Step = o.Step
	case src.Files != nil:
		f := src.Files
		if f.Format == formats.FormatCSV && f.Delimiter == "" {
			f.Delimiter = ","
		}
		if f.MaxRecordBytes == 0 {
			f.MaxRecordBytes = formats.DefaultMaxRecordBytes
		}
		omitTextDefaults(f)
		for i := range f.Fields {
			if f.Fields[i].Tensor == "" {
				f.Fields[i].Tensor = f.Fields[i].Name
			}
			if f.Fields[i].DType == "" {
				f.Fields[i].DType = tensor.Bytes.String()
			} else if dt, err := tensor.ParseDType(f.Fields[i].DType); err == nil {
				f.Fields[i].DType = dt.String()
			}
		}
	case src.Synthetic != nil:
		s := src.Synthetic
		if s.SplitSize == 0 {
			s.SplitSize = DefaultSplitSize
		}
		o := syntheticOptions(s).WithDefaults()
		*s = SyntheticSource{
			Kind: o.Kind, Count: o.Count, Seed: o.Seed, SplitSize: o.SplitSize,
			MinWords: o.MinWords, MaxWords: o.MaxWords, MeanWords: o.MeanWords, TailAlpha: o.TailAlpha,
			Width: o.Width, Height: o.Height, Channels: o.Channels, Encoding: o.Encoding, Classes: o.Classes,
			RecordBytes: o.RecordBytes,
		}
	}
}

// omitTextDefaults clears encoding and on_invalid where they spell out
// what leaving them out means. Unlike the older fields, these are encoded
// only when they differ from their defaults, so that specs written before
// they existed keep their canonical encoding and fingerprint. Only valid
// combinations are cleared, so that validation still sees (and rejects)
// `encoding: utf8` on csv or `on_invalid: fail` with `encoding: bytes`.
// For jsonl an explicit on_invalid is kept: unset means no check of its own.
func omitTextDefaults(f *FilesSource) {
	if f.Format != formats.FormatLines && f.Format != formats.FormatJSONL {
		return
	}
	if f.Encoding == formats.EncodingUTF8 {
		f.Encoding = ""
	}
	if f.Format == formats.FormatLines && f.Encoding == "" && f.OnInvalid == formats.OnInvalidFail {
		f.OnInvalid = ""
	}
}

// compileSource validates a defaults-filled source; problems are reported
// with the field path through add. Its files are read through files (nil:
// the source is only checked; it opens nothing).
func compileSource(src *Source, add func(path, format string, args ...any), files *objstore.Access) *compiledSource {
	names := src.names()
	if len(names) != 1 {
		if len(names) == 0 {
			add("source", "want exactly one of %v", sourceNames)
		} else {
			add("source", "has %v; want exactly one of %v", names, sourceNames)
		}
		return nil
	}
	switch {
	case src.Range != nil:
		o := rangeOptions(src.Range)
		if src.Range.SplitSize <= 0 {
			add("source.range.split_size", "must be > 0")
		}
		if err := o.Validate(); err != nil {
			add("source.range", "%v", err)
			return nil
		}
		return &compiledSource{
			kind:   "range",
			splits: func() ([]formats.Split, error) { return formats.RangeSplits(o) },
			index:  func() (formats.IndexSplitter, error) { return formats.RangeSplitter(o) },
			open: func(ctx context.Context, s formats.Split) (formats.Iterator, error) {
				return formats.OpenRange(ctx, o, s)
			},
		}
	case src.Files != nil:
		if files == nil {
			files = objstore.Denied()
		}
		o, err := filesOptions(src.Files, files)
		if err != nil {
			add("source.files", "%v", err)
			return nil
		}
		if err := o.Validate(); err != nil {
			add("source.files", "%v", err)
			return nil
		}
		return &compiledSource{
			kind:   "files:" + o.Format,
			splits: func() ([]formats.Split, error) { return formats.FileSplits(o) },
			open: func(ctx context.Context, s formats.Split) (formats.Iterator, error) {
				return formats.OpenFiles(ctx, o, s)
			},
			version: func(ctx context.Context, s formats.Split) (string, error) {
				return formats.SplitVersion(ctx, o, s)
			},
		}
	default:
		o := syntheticOptions(src.Synthetic)
		if src.Synthetic.SplitSize <= 0 {
			add("source.synthetic.split_size", "must be > 0")
		}
		if err := o.Validate(); err != nil {
			add("source.synthetic", "%v", err)
			return nil
		}
		return &compiledSource{
			kind:   "synthetic:" + o.Kind,
			splits: func() ([]formats.Split, error) { return formats.SyntheticSplits(o) },
			index:  func() (formats.IndexSplitter, error) { return formats.SyntheticSplitter(o) },
			open: func(ctx context.Context, s formats.Split) (formats.Iterator, error) {
				return formats.OpenSynthetic(ctx, o, s)
			},
		}
	}
}
