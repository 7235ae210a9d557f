// Package formats reads source data for pipelines: range and synthetic
// sources and files (lines, jsonl, csv, tfrecord, whole_file, webdataset,
// image_folder). Each source
// enumerates its splits deterministically and opens an Iterator on any one
// split, which is the hook that DYNAMIC and STATIC sharding use.
//
// Files:
//
//	source.go     Split and Iterator, what every source gives
//	range.go      the range source
//	synthetic.go  the synthetic sources (text, image, records)
//	files.go      file sources: path expansion, splits, opening a split with the reader of its format
//	filesoptions.go  FilesOptions: the formats, their fields, defaults and checks
//	slab.go       record buffers carved from larger allocations
//	wholefile.go  whole_file: one element per file
//	lines.go      lines and jsonl files cut at line starts
//	textenc.go    encoding and on_invalid: checking, skipping and repairing UTF-8
//	csv.go        csv files cut at record boundaries
//	tfrecord.go   TFRecord files, their CRCs, and WriteTFRecord for tests and tools
//	jsonvalue.go  JSON values to tensors
//	webdataset.go WebDataset tar shards, streamed: members grouped by key into samples
//	imagefolder.go  root/<class>/<image> trees: images and labels by sorted class name
package formats
