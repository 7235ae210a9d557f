package main

import (
	"os"
	"runtime/debug"
	"sync"
)

// The collector of the Go runtime this library starts in a Python
// process. That runtime's heap holds nothing but the clients' buffers and
// bookkeeping, a few MiB when batches are small; at Go's default GOGC of
// 100 its collector then runs often enough to be most of what reading
// costs a Python trainer beyond the Go client (docs/benchmarks/log.md,
// "The collector in the Python process"). Unless the environment sets them,
// the library runs its runtime with GOGC libGOGC and a soft memory limit
// (GOMEMLIMIT) of the larger of libMinMemoryLimit and libLimitPerPrefetch
// times the largest PrefetchBytes of a client opened so far, so that the
// headroom the higher GOGC allows stays bounded.
const (
	libGOGC             = 400
	libMinMemoryLimit   = 1 << 30
	libLimitPerPrefetch = 4
)

// gcTuning is what init set: whether the library owns GOGC and the memory
// limit, and the limit it set last.
var gcTuning struct {
	mu         sync.Mutex
	ownsGOGC   bool
	ownsLimit  bool
	limitBytes int64
}

func init() { tuneGC(os.Getenv) }

// tuneGC sets GOGC and the memory limit that getenv leaves unset.
func tuneGC(getenv func(string) string) {
	gcTuning.mu.Lock()
	defer gcTuning.mu.Unlock()
	gcTuning.ownsGOGC = getenv("GOGC") == ""
	if gcTuning.ownsGOGC {
		debug.SetGCPercent(libGOGC)
	}
	gcTuning.ownsLimit = getenv("GOMEMLIMIT") == ""
	if gcTuning.ownsLimit {
		gcTuning.limitBytes = libMinMemoryLimit
		debug.SetMemoryLimit(gcTuning.limitBytes)
	}
}

// fitMemoryLimit raises the memory limit the library owns to cover a
// client buffering up to prefetch bytes.
func fitMemoryLimit(prefetch int64) {
	gcTuning.mu.Lock()
	defer gcTuning.mu.Unlock()
	if !gcTuning.ownsLimit || prefetch <= 0 {
		return
	}
	if want := libLimitPerPrefetch * prefetch; want > gcTuning.limitBytes {
		gcTuning.limitBytes = want
		debug.SetMemoryLimit(want)
	}
}
