package autocache

import (
	"fmt"
	"time"
)

// Profile is what a worker measured of one autocache point while it
// computed the prefix: the inputs of Decide.
type Profile struct {
	// Elements is how many elements the prefix yielded, in ComputeNanos
	// of the pipeline's time spent producing them (wall time, so a
	// parallel prefix counts as fast as it runs), and Bytes their size
	// (tensor payload, as the cache stores them).
	Elements     int64
	ComputeNanos int64
	Bytes        int64
	// ReadBytesPerSec is the node's measured cache read throughput
	// (Store.ReadThroughput).
	ReadBytesPerSec float64
}

// Decision is Decide's answer and the figures it compared, per N elements.
type Decision struct {
	// Cache: put the prefix's output in the cache and read it from there
	// (put on a miss, get on a hit); false: compute the prefix every time.
	Cache bool
	// N is the number of elements the times are for.
	N int64
	// Compute is the measured time of the prefix per N elements; Read the
	// projected time to read N elements from the cache (BytesPerElement
	// × N / ReadBytesPerSec).
	Compute, Read   time.Duration
	BytesPerElement float64
	ReadBytesPerSec float64
}

// DecideN is the N of the decisions the mesh records (Cachew compares
// N-element times; 1,000 reads well in `feedmesh jobs`).
const DecideN = 1000

// Decide is Cachew's autocache policy for one autocache point: compare
// the time to compute the prefix for N elements with the time to read N
// of its elements from the cache, and cache if reading is faster. (Cachew
// compares whole pipelines, prefix + rest, against cache read + rest; the
// rest is the same on both sides.) A tie computes: caching costs disk and
// a write. It is pure: same profile, same decision.
func Decide(p Profile, n int64) (Decision, error) {
	if p.Elements <= 0 || p.ComputeNanos < 0 || p.Bytes < 0 || n <= 0 {
		return Decision{}, fmt.Errorf("autocache: cannot decide from %d elements in %d ns, %d bytes, N %d", p.Elements, p.ComputeNanos, p.Bytes, n)
	}
	if !(p.ReadBytesPerSec > 0) {
		return Decision{}, fmt.Errorf("autocache: cannot decide without a read throughput (%v bytes/s)", p.ReadBytesPerSec)
	}
	d := Decision{N: n, ReadBytesPerSec: p.ReadBytesPerSec}
	d.BytesPerElement = float64(p.Bytes) / float64(p.Elements)
	d.Compute = time.Duration(float64(p.ComputeNanos) / float64(p.Elements) * float64(n))
	d.Read = time.Duration(d.BytesPerElement * float64(n) / p.ReadBytesPerSec * float64(time.Second))
	d.Cache = d.Read < d.Compute
	return d, nil
}

// String says the decision and why, as `feedmesh jobs` prints it.
func (d Decision) String() string {
	what := "compute"
	if d.Cache {
		what = "cache"
	}
	return fmt.Sprintf("%s: per %d elements, compute %v, cache read %v (%.0f B/element at %.1f MB/s)",
		what, d.N, d.Compute.Round(time.Microsecond), d.Read.Round(time.Microsecond), d.BytesPerElement, d.ReadBytesPerSec/1e6)
}
