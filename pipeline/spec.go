package pipeline

import (
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// Spec is a dataset: a source plus a list of ops. YAML and JSON files decode
// into it (ParseYAML, ParseJSON, LoadFile) and the Go builder methods below
// construct it; all three give the same value, and its canonical encoding
// gives the dataset fingerprint (see Fingerprint). Field names in the tags
// are the names used in spec files; docs/data/spec.md documents each of them.
type Spec struct {
	// Source is where elements come from. Exactly one kind must be set.
	Source Source `yaml:"source" json:"source" cbor:"source"`
	// Ops transform the source's elements, in order.
	Ops []Op `yaml:"ops" json:"ops,omitempty" cbor:"ops,omitempty"`
	// Seed is the dataset seed: random map and filter functions without a
	// seed of their own derive theirs from it and their op index.
	Seed uint64 `yaml:"seed" json:"seed,omitempty" cbor:"seed,omitempty"`
	// Autotune tunes every map's parallelism live, as `parallelism: auto`
	// does for one map (a map's configured parallelism is where it
	// starts).
	Autotune bool `yaml:"autotune" json:"autotune,omitempty" cbor:"autotune,omitempty"`
	// Order is "any" (the default: the order depends on which worker
	// reads what) or "deterministic": the batch sequence is a function of
	// the spec and Seed alone, the same at any cluster size
	// (docs/jobs/deterministic-order.md; OrderOf).
	Order string `yaml:"order" json:"order,omitempty" cbor:"order,omitempty"`
	// OrderBlock and OrderWindow (order deterministic): elements per block
	// (one sequential read) and blocks per window (the unit a worker
	// produces). 0: DefaultOrderBlock, DefaultOrderWindow.
	OrderBlock  int64 `yaml:"order_block" json:"order_block,omitempty" cbor:"order_block,omitempty"`
	OrderWindow int64 `yaml:"order_window" json:"order_window,omitempty" cbor:"order_window,omitempty"`
	// OrderConsumers and OrderConsumer (order deterministic): this job is
	// consumer OrderConsumer of OrderConsumers (a data-parallel rank): it
	// delivers the epoch's global batches g with g mod OrderConsumers ==
	// OrderConsumer (order.Share). 0: one consumer, the whole sequence.
	OrderConsumers int64 `yaml:"order_consumers" json:"order_consumers,omitempty" cbor:"order_consumers,omitempty"`
	OrderConsumer  int64 `yaml:"order_consumer" json:"order_consumer,omitempty" cbor:"order_consumer,omitempty"`

	// access is the data-access policy the spec opens everything through
	// (Bind); nil: objstore.Local. Not part of the spec's encoding.
	access *objstore.Access
}

// Bind returns a copy of the spec that opens everything through acc: its
// source's files, URLs and objects and the files its functions' args name
// (tokenizers). A node binds every spec it receives to its data-access
// policy (data roots, allowed hosts, named stores) before it lists or
// opens anything; a spec not bound reads as its process may
// (objstore.Local: run-local, a Go program). Validate, Fingerprint and
// CanonicalEncoding open nothing, bound or not.
func (s *Spec) Bind(acc *objstore.Access) *Spec {
	c := *s
	c.access = acc
	return &c
}

// files is the policy the spec opens through.
func (s *Spec) files() *objstore.Access {
	if s.access != nil {
		return s.access
	}
	return objstore.Local()
}

// Source is a union: exactly one field is set.
type Source struct {
	// Range yields the integers of a range.
	Range *RangeSource `yaml:"range" json:"range,omitempty" cbor:"range,omitempty"`
	// Files reads files in one of the supported formats.
	Files *FilesSource `yaml:"files" json:"files,omitempty" cbor:"files,omitempty"`
	// Synthetic generates deterministic data.
	Synthetic *SyntheticSource `yaml:"synthetic" json:"synthetic,omitempty" cbor:"synthetic,omitempty"`
}

// RangeSource yields int64 scalars "value": start, start+step, … < stop.
type RangeSource struct {
	// Start is the first value; Stop is excluded.
	Start int64 `yaml:"start" json:"start" cbor:"start,omitempty"`
	Stop  int64 `yaml:"stop" json:"stop" cbor:"stop,omitempty"`
	// Step defaults to 1.
	Step int64 `yaml:"step" json:"step,omitempty" cbor:"step,omitempty"`
	// SplitSize is the number of elements per split (default 1024).
	SplitSize int64 `yaml:"split_size" json:"split_size,omitempty" cbor:"split_size,omitempty"`
}

// FilesSource reads files matching globs in one of the supported formats.
type FilesSource struct {
	// Paths are globs; relative ones resolve against the spec file's
	// directory when the spec is loaded with LoadFile.
	Paths []string `yaml:"paths" json:"paths" cbor:"paths,omitempty"`
	// Format is lines | jsonl | csv | tfrecord | whole_file | webdataset |
	// image_folder.
	Format string `yaml:"format" json:"format" cbor:"format,omitempty"`
	// Fields selects jsonl fields or csv columns and their types.
	Fields []Field `yaml:"fields" json:"fields,omitempty" cbor:"fields,omitempty"`
	// Delimiter is the csv separator, one character (default ",").
	Delimiter string `yaml:"delimiter" json:"delimiter,omitempty" cbor:"delimiter,omitempty"`
	// SplitBytes > 0 splits large text and tfrecord files into byte ranges
	// of about this size; 0 makes one split per file.
	SplitBytes int64 `yaml:"split_bytes" json:"split_bytes,omitempty" cbor:"split_bytes,omitempty"`
	// SkipCorrupt makes the tfrecord reader skip (and count) corrupt
	// records instead of failing.
	SkipCorrupt bool `yaml:"skip_corrupt" json:"skip_corrupt,omitempty" cbor:"skip_corrupt,omitempty"`
	// Encoding of lines and jsonl: utf8 (default: lines must be valid
	// UTF-8) or bytes (lines only: raw bytes, never checked).
	Encoding string `yaml:"encoding" json:"encoding,omitempty" cbor:"encoding,omitempty"`
	// OnInvalid is what lines and jsonl do with a line that is not valid
	// UTF-8: fail (the default for lines), skip or replace (each invalid
	// sequence by U+FFFD); skipped and replaced lines are counted in the
	// source's statistics. Unset for jsonl, lines are not checked beyond
	// what the JSON decoder does (it replaces invalid bytes in strings).
	OnInvalid string `yaml:"on_invalid" json:"on_invalid,omitempty" cbor:"on_invalid,omitempty"`
	// MaxRecordBytes bounds one line, record or whole file (default
	// formats.DefaultMaxRecordBytes).
	MaxRecordBytes int64 `yaml:"max_record_bytes" json:"max_record_bytes,omitempty" cbor:"max_record_bytes,omitempty"`
	// Columns (parquet) are the columns to read, in this order (all when
	// empty).
	Columns []string `yaml:"columns" json:"columns,omitempty" cbor:"columns,omitempty"`
	// OnNull (parquet) is what a null does: fail (default), skip (the row,
	// counted) or zero (a zero, empty bytes or an empty list).
	OnNull string `yaml:"on_null" json:"on_null,omitempty" cbor:"on_null,omitempty"`
	// ObjectStore configures s3:// and https:// paths.
	ObjectStore *ObjectStoreOptions `yaml:"object_store" json:"object_store,omitempty" cbor:"object_store,omitempty"`
}

// ObjectStoreOptions say which object store s3:// paths are in and how
// hard to read s3:// and https:// paths (objstore.Config; zero values are
// its defaults). Where a store is and how to sign in to it is the node
// operator's: a named store (objstore.NamedStore), never the spec's.
type ObjectStoreOptions struct {
	// Store names the store s3://bucket/key paths are in (a node's
	// --object-store NAME=…); without it, paths name it:
	// s3://NAME/bucket/key.
	Store string `yaml:"store" json:"store,omitempty" cbor:"store,omitempty"`
	// Endpoint, Region and PathStyle are refused (validation says how to
	// configure a named store instead); they remain so that a spec of
	// before named stores decodes and is told so.
	Endpoint  string `yaml:"endpoint" json:"endpoint,omitempty" cbor:"endpoint,omitempty"`
	Region    string `yaml:"region" json:"region,omitempty" cbor:"region,omitempty"`
	PathStyle bool   `yaml:"path_style" json:"path_style,omitempty" cbor:"path_style,omitempty"`
	// MaxConcurrentReads bounds the requests in flight per process (16).
	MaxConcurrentReads int `yaml:"max_concurrent_reads" json:"max_concurrent_reads,omitempty" cbor:"max_concurrent_reads,omitempty"`
	// ChunkBytes is the size of one range request (8 MiB).
	ChunkBytes int64 `yaml:"chunk_bytes" json:"chunk_bytes,omitempty" cbor:"chunk_bytes,omitempty"`
	// ReadAheadChunks is how many chunks a sequential reader fetches ahead (2).
	ReadAheadChunks int `yaml:"read_ahead_chunks" json:"read_ahead_chunks,omitempty" cbor:"read_ahead_chunks,omitempty"`
	// MaxRetries of a throttled or transiently failed request (5; -1: none).
	MaxRetries int `yaml:"max_retries" json:"max_retries,omitempty" cbor:"max_retries,omitempty"`
}

// Field maps a jsonl field or csv column to a tensor.
type Field struct {
	// Name is the JSON field or CSV column.
	Name string `yaml:"name" json:"name" cbor:"name,omitempty"`
	// Tensor is the output tensor's name (default Name).
	Tensor string `yaml:"tensor" json:"tensor,omitempty" cbor:"tensor,omitempty"`
	// DType is the tensor's dtype (default "bytes").
	DType string `yaml:"dtype" json:"dtype,omitempty" cbor:"dtype,omitempty"`
}

// SyntheticSource generates deterministic data for demos and benchmarks.
type SyntheticSource struct {
	// Kind is text | image | records.
	Kind string `yaml:"kind" json:"kind" cbor:"kind,omitempty"`
	// Count is the number of elements; Seed selects the data.
	Count int64  `yaml:"count" json:"count" cbor:"count,omitempty"`
	Seed  uint64 `yaml:"seed" json:"seed,omitempty" cbor:"seed,omitempty"`
	// SplitSize is the number of elements per split (default 1024).
	SplitSize int64 `yaml:"split_size" json:"split_size,omitempty" cbor:"split_size,omitempty"`
	// Text: lengths in words (defaults 1, 1024, 32, 1.5; see docs/data/spec.md for
	// the distribution).
	MinWords  int64   `yaml:"min_words" json:"min_words,omitempty" cbor:"min_words,omitempty"`
	MaxWords  int64   `yaml:"max_words" json:"max_words,omitempty" cbor:"max_words,omitempty"`
	MeanWords float64 `yaml:"mean_words" json:"mean_words,omitempty" cbor:"mean_words,omitempty"`
	TailAlpha float64 `yaml:"tail_alpha" json:"tail_alpha,omitempty" cbor:"tail_alpha,omitempty"`
	// Image: size (defaults 64×64×3), encoding raw | png | jpeg (default
	// raw) and number of distinct labels (default 10).
	Width    int    `yaml:"width" json:"width,omitempty" cbor:"width,omitempty"`
	Height   int    `yaml:"height" json:"height,omitempty" cbor:"height,omitempty"`
	Channels int    `yaml:"channels" json:"channels,omitempty" cbor:"channels,omitempty"`
	Encoding string `yaml:"encoding" json:"encoding,omitempty" cbor:"encoding,omitempty"`
	Classes  int    `yaml:"classes" json:"classes,omitempty" cbor:"classes,omitempty"`
	// Records: bytes per record (default 1024).
	RecordBytes int `yaml:"record_bytes" json:"record_bytes,omitempty" cbor:"record_bytes,omitempty"`
}

// Op is a union: exactly one field is set.
type Op struct {
	// Each field is one kind of op; see docs/data/spec.md for their fields.
	Map                    *MapOp         `yaml:"map" json:"map,omitempty" cbor:"map,omitempty"`
	Filter                 *FilterOp      `yaml:"filter" json:"filter,omitempty" cbor:"filter,omitempty"`
	Shuffle                *ShuffleOp     `yaml:"shuffle" json:"shuffle,omitempty" cbor:"shuffle,omitempty"`
	Batch                  *BatchOp       `yaml:"batch" json:"batch,omitempty" cbor:"batch,omitempty"`
	PaddedBatch            *PaddedBatchOp `yaml:"padded_batch" json:"padded_batch,omitempty" cbor:"padded_batch,omitempty"`
	BucketBySequenceLength *BucketOp      `yaml:"bucket_by_sequence_length" json:"bucket_by_sequence_length,omitempty" cbor:"bucket_by_sequence_length,omitempty"`
	Repeat                 *RepeatOp      `yaml:"repeat" json:"repeat,omitempty" cbor:"repeat,omitempty"`
	Take                   *TakeOp        `yaml:"take" json:"take,omitempty" cbor:"take,omitempty"`
	Skip                   *SkipOp        `yaml:"skip" json:"skip,omitempty" cbor:"skip,omitempty"`
	Prefetch               *PrefetchOp    `yaml:"prefetch" json:"prefetch,omitempty" cbor:"prefetch,omitempty"`
	Cost                   *CostOp        `yaml:"cost" json:"cost,omitempty" cbor:"cost,omitempty"`
	Pack                   *PackOp        `yaml:"pack" json:"pack,omitempty" cbor:"pack,omitempty"`
	Autocache              *AutocacheOp   `yaml:"autocache" json:"autocache,omitempty" cbor:"autocache,omitempty"`
}

// AutocacheOp marks the point of a pipeline up to which reusing computed
// elements is acceptable (Cachew's autocache, autocache.go): what the ops
// before it yield for a split may be cached on the workers' disks and read
// back instead of computed, in later epochs and by later jobs with the
// same prefix. In files, `autocache: cache` is short for
// `autocache: {mode: cache}`, and `autocache:` alone is the default.
type AutocacheOp struct {
	// Mode is auto (the default: the mesh measures and decides), compute
	// (never cache) or cache (always put, then get).
	Mode string `yaml:"mode" json:"mode,omitempty" cbor:"mode,omitempty"`
}

// MapOp applies a registered map function to every element.
type MapOp struct {
	// Fn names a registered map function; Args are its arguments.
	Fn   string  `yaml:"fn" json:"fn" cbor:"fn,omitempty"`
	Args fn.Args `yaml:"args" json:"args,omitempty" cbor:"args,omitempty"`
	// Parallelism is the number of elements transformed at once (default
	// 1). At most 2×Parallelism jobs of up to 64 elements (one element
	// unless the function is cheap) are in flight. ParallelismAuto (`auto`
	// in YAML and JSON) lets the pipeline choose and revise it from its
	// own measurements (autotune.go).
	Parallelism int `yaml:"parallelism" json:"parallelism,omitempty" cbor:"parallelism,omitempty"`
	// Deterministic keeps the input order when Parallelism > 1 (default
	// true); false lets faster elements overtake slower ones.
	Deterministic *bool `yaml:"deterministic" json:"deterministic,omitempty" cbor:"deterministic,omitempty"`
	// Seed seeds random functions; 0 derives one from Spec.Seed and the op
	// index.
	Seed uint64 `yaml:"seed" json:"seed,omitempty" cbor:"seed,omitempty"`
}

// FilterOp keeps the elements for which a registered filter function
// returns true.
type FilterOp struct {
	// Fn names a registered filter function; Args are its arguments; Seed
	// is as in MapOp.
	Fn   string  `yaml:"fn" json:"fn" cbor:"fn,omitempty"`
	Args fn.Args `yaml:"args" json:"args,omitempty" cbor:"args,omitempty"`
	Seed uint64  `yaml:"seed" json:"seed,omitempty" cbor:"seed,omitempty"`
}

// ShuffleOp shuffles within a window of Buffer elements, like tf.data.
type ShuffleOp struct {
	// Buffer is the window size (> 0); Seed seeds the draws.
	Buffer int64  `yaml:"buffer" json:"buffer" cbor:"buffer,omitempty"`
	Seed   uint64 `yaml:"seed" json:"seed,omitempty" cbor:"seed,omitempty"`
}

// BatchOp stacks Size consecutive elements into a batch.
type BatchOp struct {
	// Size is the batch size; DropRemainder drops a last partial batch.
	Size          int64 `yaml:"size" json:"size" cbor:"size,omitempty"`
	DropRemainder bool  `yaml:"drop_remainder" json:"drop_remainder,omitempty" cbor:"drop_remainder,omitempty"`
}

// PaddedBatchOp batches Size elements, padding variable-length tensors to
// the longest in the batch.
type PaddedBatchOp struct {
	// Size, PadValue and DropRemainder: see docs/data/spec.md.
	Size          int64   `yaml:"size" json:"size" cbor:"size,omitempty"`
	PadValue      float64 `yaml:"pad_value" json:"pad_value,omitempty" cbor:"pad_value,omitempty"`
	DropRemainder bool    `yaml:"drop_remainder" json:"drop_remainder,omitempty" cbor:"drop_remainder,omitempty"`
}

// BucketOp is bucket_by_sequence_length: elements are grouped by the length
// of Tensor into buckets (bucket i holds lengths in (Boundaries[i-1],
// Boundaries[i]]) and batched per bucket with BatchSizes[i], padded to the
// longest element of each batch.
type BucketOp struct {
	// Tensor is the tensor whose length (tensor.Len) selects the bucket.
	Tensor string `yaml:"tensor" json:"tensor" cbor:"tensor,omitempty"`
	// Boundaries are the buckets' upper bounds (increasing); BatchSizes
	// has one batch size per bucket (len(Boundaries)+1).
	Boundaries []int64 `yaml:"boundaries" json:"boundaries" cbor:"boundaries,omitempty"`
	BatchSizes []int64 `yaml:"batch_sizes" json:"batch_sizes" cbor:"batch_sizes,omitempty"`
	// PadValue fills the padding; DropRemainder drops the partial batches
	// left at the end of the input.
	PadValue      float64 `yaml:"pad_value" json:"pad_value,omitempty" cbor:"pad_value,omitempty"`
	DropRemainder bool    `yaml:"drop_remainder" json:"drop_remainder,omitempty" cbor:"drop_remainder,omitempty"`
}

// RepeatOp re-runs its input Count times, or forever. Neither set means
// forever. A pass over the input that yields nothing ends the repetition
// (so repeating an empty dataset forever is empty, as in tf.data).
type RepeatOp struct {
	// Count is the number of passes; Forever repeats without end.
	Count   *int64 `yaml:"count" json:"count,omitempty" cbor:"count,omitempty"`
	Forever bool   `yaml:"forever" json:"forever,omitempty" cbor:"forever,omitempty"`
}

// TakeOp passes the first Count elements. In files, `take: 10` is short for
// `take: {count: 10}`.
type TakeOp struct {
	// Count is the number of elements to pass.
	Count int64 `yaml:"count" json:"count" cbor:"count,omitempty"`
}

// SkipOp drops the first Count elements (`skip: 10` works too).
type SkipOp struct {
	// Count is the number of elements to drop.
	Count int64 `yaml:"count" json:"count" cbor:"count,omitempty"`
}

// PrefetchOp runs its input ahead in a goroutine, holding at most Buffer
// elements (default 2).
type PrefetchOp struct {
	// Buffer is the number of elements held ahead.
	Buffer int64 `yaml:"buffer" json:"buffer" cbor:"buffer,omitempty"`
}

// CostOp spends CPU (CPUMicros of busy work) or waits (SleepMicros) per
// element: a stand-in for expensive preprocessing in benchmarks. Exactly
// one must be set.
type CostOp struct {
	// CPUMicros is busy CPU time and SleepMicros waiting time per element.
	CPUMicros   int64 `yaml:"cpu_us" json:"cpu_us,omitempty" cbor:"cpu_us,omitempty"`
	SleepMicros int64 `yaml:"sleep_us" json:"sleep_us,omitempty" cbor:"sleep_us,omitempty"`
}

// PackOp packs variable-length token sequences (documents) into rows of
// exactly Length tokens, as language-model pretraining feeds them, with
// document_ids and positions tensors so that attention can be masked per
// document. See pack.go and docs/data/spec.md.
type PackOp struct {
	// Tensor is the documents' int32 or int64 [n] tensor (tokens); the
	// rows' tensor of the same name and dtype is [Length].
	Tensor string `yaml:"tensor" json:"tensor" cbor:"tensor,omitempty"`
	// Length is the row length in tokens.
	Length int64 `yaml:"length" json:"length" cbor:"length,omitempty"`
	// EOS, when set, is appended to every document before packing.
	EOS *int64 `yaml:"eos" json:"eos,omitempty" cbor:"eos,omitempty"`
	// Strategy is concat (documents one after another, cut at row ends;
	// the default) or first_fit (whole documents into the first open row
	// with room; longer ones are cut into rows first).
	Strategy string `yaml:"strategy" json:"strategy,omitempty" cbor:"strategy,omitempty"`
	// MaxOpenBins bounds the rows first_fit keeps open (default
	// DefaultPackOpenBins): its memory is MaxOpenBins × Length tokens.
	MaxOpenBins int64 `yaml:"max_open_bins" json:"max_open_bins,omitempty" cbor:"max_open_bins,omitempty"`
	// PadValue fills the end of rows that are not full.
	PadValue int64 `yaml:"pad_value" json:"pad_value,omitempty" cbor:"pad_value,omitempty"`
}

// opNames lists the op keys, sorted, for error messages.
var opNames = []string{"autocache", "batch", "bucket_by_sequence_length", "cost", "filter", "map", "pack", "padded_batch", "prefetch", "repeat", "shuffle", "skip", "take"}

// sourceNames lists the source kinds, sorted.
var sourceNames = []string{"files", "range", "synthetic"}

// Name returns the op's key ("map", "shuffle", …), or "" if none is set.
// When several are set (an invalid op) it returns the first.
func (o *Op) Name() string {
	names := o.names()
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func (o *Op) names() []string {
	var n []string
	add := func(set bool, name string) {
		if set {
			n = append(n, name)
		}
	}
	add(o.Map != nil, "map")
	add(o.Filter != nil, "filter")
	add(o.Shuffle != nil, "shuffle")
	add(o.Batch != nil, "batch")
	add(o.PaddedBatch != nil, "padded_batch")
	add(o.BucketBySequenceLength != nil, "bucket_by_sequence_length")
	add(o.Repeat != nil, "repeat")
	add(o.Take != nil, "take")
	add(o.Skip != nil, "skip")
	add(o.Prefetch != nil, "prefetch")
	add(o.Cost != nil, "cost")
	add(o.Pack != nil, "pack")
	add(o.Autocache != nil, "autocache")
	return n
}

// batches reports whether the op turns elements into batches.
func (o *Op) batches() bool {
	return o.Batch != nil || o.PaddedBatch != nil || o.BucketBySequenceLength != nil
}

func (s *Source) names() []string {
	var n []string
	if s.Files != nil {
		n = append(n, "files")
	}
	if s.Range != nil {
		n = append(n, "range")
	}
	if s.Synthetic != nil {
		n = append(n, "synthetic")
	}
	return n
}
