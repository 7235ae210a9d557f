// Package order is the pure core of deterministic order (order:
// deterministic; docs/jobs/deterministic-order.md): which element sits at
// each global position of an epoch, how the positions are cut across
// consumers and re-cut after a resume on another number of consumers,
// mixtures of several sources with exact proportions per window, skipped
// ranges, the per-epoch visitation digest, and the small checkpoint that
// records a position.
//
// It is pure in the etcd-raft sense: no goroutines, clocks, sockets, files
// or global randomness. Everything is a function of its arguments (a seed,
// an epoch, counts), so every node, and the client, computes the same
// answer without asking anyone: position → element is O(1) and nothing of
// the size of the dataset is materialized.
//
// The layers, bottom up:
//
//   - Perm: a seeded bijection of [0, n) (a Feistel network with cycle
//     walking, as Grain's index_shuffle), O(1) both ways.
//   - Index: element addressing, a flat element id ↔ (split, index in
//     split), from per-split counts recorded at dataset registration.
//   - Layout: the epoch's global permutation in blocks: contiguous runs of
//     element ids (sequential reads) permuted as units, then mixed within
//     windows of W blocks (the block shuffle that replaces a buffer
//     shuffle). A window is the unit a worker produces.
//   - Gaps and Cut: the positions of an epoch less skipped and
//     already-delivered ones, cut across N consumers (the r-th kept
//     position goes to consumer r mod N), and Merge, the re-cut after a
//     resume on N' consumers.
//   - Mixture: which source (and which of its positions) each position of
//     a mixed stream takes, exact per window, with weights that change by
//     stage (a step schedule).
//   - Digest: an order-independent multiset digest of element ids.
//   - Checkpoint: a consumer's position, encoded in well under 1 KB.
//
// Bad input (a decoded checkpoint, counts from the network) is answered
// with an error, never a panic.
package order
