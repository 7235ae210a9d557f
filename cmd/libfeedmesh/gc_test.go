package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the library sets GOGC and the memory limit the environment
// leaves unset, and only those; a client with a large prefetch budget
// raises the limit it owns.
func TestTuneGC(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(-1)
	ownsGOGC, ownsLimit, limitBytes := gcTuning.ownsGOGC, gcTuning.ownsLimit, gcTuning.limitBytes
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
		gcTuning.ownsGOGC, gcTuning.ownsLimit, gcTuning.limitBytes = ownsGOGC, ownsLimit, limitBytes
	})
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	debug.SetGCPercent(100)
	debug.SetMemoryLimit(5 << 30)
	tuneGC(env(map[string]string{"GOGC": "100", "GOMEMLIMIT": "5GiB"}))
	if p := debug.SetGCPercent(-1); p != 100 {
		t.Errorf("GOGC set in the environment: percent %d, want it left at 100", p)
	}
	debug.SetGCPercent(100)
	if l := debug.SetMemoryLimit(-1); l != 5<<30 {
		t.Errorf("GOMEMLIMIT set in the environment: limit %d, want it left", l)
	}
	fitMemoryLimit(4 << 30)
	if l := debug.SetMemoryLimit(-1); l != 5<<30 {
		t.Errorf("a client raised a limit the environment set: %d", l)
	}

	tuneGC(env(nil))
	if p := debug.SetGCPercent(-1); p != libGOGC {
		t.Errorf("nothing in the environment: percent %d, want %d", p, libGOGC)
	}
	if l := debug.SetMemoryLimit(-1); l != libMinMemoryLimit {
		t.Errorf("nothing in the environment: limit %d, want %d", l, libMinMemoryLimit)
	}
	fitMemoryLimit(64 << 20) // below the floor: no change
	if l := debug.SetMemoryLimit(-1); l != libMinMemoryLimit {
		t.Errorf("a small client moved the limit to %d", l)
	}
	fitMemoryLimit(1 << 30)
	if l := debug.SetMemoryLimit(-1); l != libLimitPerPrefetch<<30 {
		t.Errorf("a client of 1 GiB prefetch: limit %d, want %d", l, libLimitPerPrefetch<<30)
	}
}
