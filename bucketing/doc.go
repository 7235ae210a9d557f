// Package bucketing holds the pure logic behind length bucketing: which
// bucket a sequence length falls in, accumulation of per-bucket batches, and
// assembly of a batch from elements (stacking same-shape tensors, padding
// variable-length ones to the longest in the batch).
//
// It has no goroutines, clocks or I/O: the pipeline's
// bucket_by_sequence_length, batch and padded_batch ops drive it, and the
// coordinated-reads round schedule builds on it. Everything here is a
// function of its inputs and is tested by tables and properties.
//
// Files:
//
//	bucket.go     Bucketer: which bucket a length falls in, per-bucket accumulation into batches
//	assemble.go   Stack and Pad: a batch from elements (padding to the longest, the lengths tensor)
//	window.go     Grouper: windows of m batches of one bucket (coordinated reads' rounds)
//	rounds.go     Schedule: which worker serves round r, and changes from an agreed round on
//	stepmodel.go  the step-time model of a synchronous step (the slowest consumer's padded tokens)
package bucketing
