// Package pipeline is feedmesh's input-pipeline engine: declarative
// datasets (a source plus a list of ops) over real file formats, executed
// in-process, fingerprinted, with per-op statistics. Workers of the
// distributed service run it on the splits they are assigned; `feedmesh
// run-local` runs it on one machine.
//
// # Specs
//
// A Spec is one Go value that YAML (ParseYAML), JSON (ParseJSON, LoadFile)
// and the builder (NewSpec(...).Map(...).Batch(...)) all produce. Decoding
// is strict: unknown keys, ops, sources and functions are errors naming the
// path (`ops[2].shuffle.buffer: must be > 0`), reported by Validate before
// anything runs. docs/data/spec.md documents every field.
//
// The canonical encoding (CanonicalEncoding: RFC 8949 core deterministic
// CBOR of the spec with defaults filled and args normalized) identifies a
// dataset; Fingerprint is its SHA-256. Equal specs written in YAML, JSON or
// Go have equal fingerprints; any change of meaning changes it.
//
// # Execution
//
// Open(ctx, spec, splits) builds a pull-based chain of iterators: the
// source reads the given splits one after another (Splits(spec) lists them
// all; a worker passes the ones it was assigned) and each op pulls from the
// previous one. Only prefetch and parallel map own goroutines; they start
// them when opened and stop and wait for them on Close, and every buffer
// is bounded by a number in the spec. Shuffle and batch windows run across
// split boundaries; repeat re-opens everything before it, re-reading the
// split sequence, with a new epoch that reseeds shuffles and random
// functions (reproducibly). Random functions are seeded per (seed, split,
// element index), so their output does not depend on thread timing or on
// which worker reads a split.
//
// # Provenance
//
// A SplitProvider hands out each split with the job epoch it is read for
// and the element indices to exclude (delivered before): the source still
// reads them, to keep positions stable, but drops them before the first
// op. Options.Track makes the iterator a Tracker as well: for each element
// Next returns, LastProvenance names the source elements it was made of
// (a batch: the union of its members'), grouped by (epoch, split); and
// Completed lists the splits that have been read to their end and all of
// whose elements have left the pipeline, returned or dropped by an op
// (filter, skip, a dropped remainder), with the indices returned. That is
// what exactly-once delivery acknowledges and, for a split re-read by
// another worker, excludes. Off, tracking costs a nil check per drop and
// per batch.
//
// # Statistics
//
// Every op records elements in and out, bytes out, time in its own work
// (busy) and time waiting on its input (wait), Plumber-style; the op with
// the most busy time per unit of usable parallelism bounds throughput
// (Stats.Bounding). Timing is sampled per call chain to keep its cost
// small; Options.DisableStats turns it off to measure that cost.
//
// The pure bucketing logic (bucket index, per-bucket accumulation,
// stacking and padding of batches) lives in package bucketing; sources in
// pipeline/formats; map and filter functions in pipeline/fn.
package pipeline
