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
package objstore
