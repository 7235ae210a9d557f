// Package share lets concurrent jobs of the same dataset share one
// production of batches on a worker (ephemeral data sharing, as in tf.data
// service): hyperparameter sweeps read the same input pipeline many times at
// once, and without sharing the preprocessing cost grows with the number of
// jobs.
//
// Per (worker, dataset fingerprint) there is one sliding window of produced
// items (encoded batches, transport/batch.Frame, handed out as the same
// frame to every reader: no re-encoding, no copy), bounded in bytes
// (Config.WindowBytes, share.window_bytes), with one cursor per job.
//
//   - Window is the pure mechanism, in the etcd-raft sense: no goroutines,
//     clocks or locks. A job whose cursor is at the front (it has read
//     everything retained) is told to produce; the produced item is pushed
//     and the oldest items are evicted while the window is over its bound.
//   - Shared wraps a Window for concurrent readers: the reader at the front
//     produces (calling the pipeline without the lock held) while the others
//     at the front wait for that production and read its result.
//
// The semantics, held by the property and fuzz tests:
//
//   - Every job reads items in production order and never the same item
//     twice. Positions are absolute (0 = the first item ever produced).
//   - A job at the front never waits for a slow job: production follows the
//     fastest job, and a job that lags more than the window behind skips to
//     the oldest retained item, missing the evicted ones (relaxed,
//     at-most-once visitation), which JobStats counts as EvictedBeforeRead.
//   - The window never holds more than its byte bound; an item larger than
//     the whole window is an error (ErrItemTooLarge).
//   - Nothing is produced ahead of demand: the number of items produced
//     equals the furthest cursor's progress.
//   - A job joins at the oldest retained item; when the last job leaves,
//     every retained item is released.
package share
