package api

import "github.com/feedmesh/feedmesh/ranges"

// AutocacheDecision is the decision the mesh recorded (in Raft, once per
// prefix fingerprint: the first worker to finish profiling decides for
// every worker and every later job) for an autocache point in mode auto,
// with its inputs. Times are per N elements.
type AutocacheDecision struct {
	// Cache: put the prefix's output on the workers' disks and read it
	// back; false: compute it every time.
	Cache bool  `cbor:"1,keyasint" json:"cache"`
	N     int64 `cbor:"2,keyasint" json:"n"`
	// ComputeSeconds is the measured time of the prefix per N elements;
	// ReadSeconds the projected time to read N from the cache
	// (BytesPerElement × N / ReadBytesPerSec, the measured throughput).
	ComputeSeconds  float64 `cbor:"3,keyasint" json:"compute_seconds"`
	ReadSeconds     float64 `cbor:"4,keyasint" json:"read_seconds"`
	BytesPerElement float64 `cbor:"5,keyasint" json:"bytes_per_element"`
	ReadBytesPerSec float64 `cbor:"6,keyasint" json:"read_bytes_per_sec"`
	// Elements is how many elements were profiled, by Worker for Job.
	Elements int64  `cbor:"7,keyasint" json:"elements"`
	Worker   string `cbor:"8,keyasint" json:"worker"`
	Job      string `cbor:"9,keyasint" json:"job"`
}

// AutocacheInfo is one autocache point of a job's pipeline
// (JobInfo.Autocache).
type AutocacheInfo struct {
	// Op is the op's index in the spec; Mode its mode (auto, compute,
	// cache); Prefix the fingerprint of the pipeline before it.
	Op     int    `json:"op"`
	Mode   string `json:"mode"`
	Prefix string `json:"prefix"`
	// Decision (mode auto) is the recorded decision; nil while workers
	// profile (they put meanwhile, so the first epoch is cached either
	// way).
	Decision *AutocacheDecision `json:"decision,omitempty"`
}

// Decided says what the point does: "cache" or "compute" (decided or
// forced by the mode) or "profiling".
func (a AutocacheInfo) Decided() string {
	switch {
	case a.Mode == "compute" || (a.Decision != nil && !a.Decision.Cache):
		return "compute"
	case a.Mode == "cache" || a.Decision != nil:
		return "cache"
	}
	return "profiling"
}

// MethodCacheHeld (CacheHeldRequest → CacheHeldResponse) is answered by the
// node asked, never forwarded: which splits of a prefix its autocache
// holds. Workers ask their peers before fetching a split they miss.
const MethodCacheHeld = "worker.cacheheld"

// CacheHeldRequest names a prefix fingerprint.
type CacheHeldRequest struct {
	Prefix string `cbor:"1,keyasint"`
}

// CacheHeldResponse lists the splits held, as intervals.
type CacheHeldResponse struct {
	Splits ranges.Set `cbor:"1,keyasint"`
}

// CacheFetchVersion is the protocol version of a cache stream
// (transport.KindCache): one CacheFetchRequest frame, answered by one
// CacheFetchResponse frame and, when found, Size raw bytes of the file.
const CacheFetchVersion = 1

// CacheFetchRequest asks for one cached split.
type CacheFetchRequest struct {
	Version int    `cbor:"1,keyasint"`
	Prefix  string `cbor:"2,keyasint"`
	Split   int64  `cbor:"3,keyasint"`
}

// CacheFetchResponse answers it: Found with the file's Size, or Error.
type CacheFetchResponse struct {
	Found bool   `cbor:"1,keyasint"`
	Size  int64  `cbor:"2,keyasint,omitempty"`
	Error string `cbor:"3,keyasint,omitempty"`
}
