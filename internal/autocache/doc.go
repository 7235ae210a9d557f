// Package autocache is the worker side of Cachew's autocache (ATC'22,
// §4.4 and §5.1): the on-disk store of cached pipeline prefixes and the
// pure decision between computing a prefix and reading it from the cache.
//
// A spec's `autocache` op marks where reuse is acceptable. What the prefix
// before it yields for one split is one cache entry, keyed by (prefix
// fingerprint, split id): a file under the node's data dir (file.go gives
// its format: every record checksummed, a trailer that says how many
// records and bytes the file holds, so a truncated or corrupt file is
// detected and never served). Store (store.go) bounds the entries' bytes
// and evicts the least recently used, and rebuilds its index from the
// files when the node restarts; it also hands an entry's file to another
// node and reads one another node sent (fetch.go). Decide (decide.go)
// compares the prefix's measured compute time per N elements with the
// projected time to read them (bytes per element over the measured read
// throughput, throughput.go).
//
// The package does no networking and knows nothing of Raft: the mesh
// records the decision in Raft and wires the store into the worker's
// pipelines (pipeline.Cache).
package autocache
