// Package bucketing holds the pure logic behind length bucketing: which
// bucket a sequence length falls in, accumulation of per-bucket batches,
// assembly of a batch from elements (stacking same-shape tensors, padding
// variable-length ones to the longest in the batch), windows of m batches
// of one bucket (a coordinated read's round), and the step-time model of
// a synchronous step.
//
// It has no goroutines, clocks or I/O: the pipeline's
// bucket_by_sequence_length, batch and padded_batch ops drive it, and the
// node's coordinated reads group its batches into round windows (the round
// schedule itself is api/rounds). Everything here is a function of its
// inputs and is tested by tables, properties and fuzzing.
package bucketing
