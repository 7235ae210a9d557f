// Package formats reads source data for pipelines: range and synthetic
// sources and files (lines, jsonl, csv, tfrecord, whole_file, webdataset,
// image_folder). Each source
// enumerates its splits deterministically and opens an Iterator on any one
// split, which is the hook that DYNAMIC and STATIC sharding use.
package formats
