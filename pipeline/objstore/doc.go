// Package objstore opens the files a pipeline reads wherever they live: a
// local path, an S3 (or S3-compatible) object given as
// s3://bucket/key, or an https:// URL. Every source format reads through
// the same File (io.ReaderAt with a size), so a format that works on local
// files works on object storage unchanged.
//
// Remote objects are read in chunks by range requests. A File keeps at
// most Config.ReadAheadChunks chunks of Config.ChunkBytes each; reading a
// chunk starts fetching the next ones (read-ahead); ReadRanges fetches
// whole ranges at once (a Parquet row group's column chunks). At most
// Config.MaxConcurrentReads requests run at once per Store, whatever the
// number of open files. Requests that fail with a throttling or transient
// error (HTTP 429, 500, 502, 503, 504, S3 SlowDown, connection resets)
// are retried with exponential backoff and jitter, up to Config.MaxRetries
// times. Every range request of a File carries the ETag the object had
// when it was opened, so an object replaced or deleted while a File reads
// it is an error naming it (ErrVanished), never a mix of two versions.
//
// What a pipeline may open is a policy, Access: the paths, URLs and
// object names of a spec all go through one. A node's allows local files
// under its data roots only (opened through os.Root: no `..`, no link out
// of a root, none of the node's own secrets), http(s) URLs of its allowed
// hosts only (every redirect hop and every address connected to checked,
// so neither a redirect nor DNS rebinding reaches an internal address),
// and s3:// objects of its named stores only (NamedStore: where a store
// is and its credentials are the node's, never a spec's). A refusal is
// ErrNotAllowed with a message that names what the spec named and no more
// (DeniedError); the reason goes to the policy's log. Local is the policy
// of a user's own process: every file, any host, the environment's S3.
package objstore
