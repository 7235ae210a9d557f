package fn

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
)

// MaxCostMicros bounds the cost function's per-element time (1 s): a map
// function cannot be interrupted, so its wait must stay short.
const MaxCostMicros = 1_000_000

// MaxCostOutBytes bounds the cost function's out_bytes (16 MiB).
const MaxCostOutBytes = 16 << 20

// cost is the map-function twin of the cost op: per element it spends
// cpu_us of busy CPU or waits sleep_us, and returns the element unchanged.
// Unlike the op, a map runs at any parallelism, so it stands in for an
// expensive parallelisable transform (a decode, an augmentation) in
// benchmarks and in the tests of `feedmesh diagnose`. It is deterministic:
// its output is its input, except that with out_bytes: N (0 < N <=
// MaxCostOutBytes) it also sets a uint8 tensor "payload" of N bytes (a
// fixed pattern), replacing any earlier one: a transform that grows or
// shrinks what an element weighs, as decoding an image or cropping it
// does.
func cost(a Args) (MapFn, error) {
	var cpu, sleep, outBytes int64
	err := func() (err error) {
		if err = a.Known("cpu_us", "sleep_us", "out_bytes"); err != nil {
			return
		}
		if outBytes, err = a.Int("out_bytes", 0); err != nil {
			return
		}
		if outBytes < 0 || outBytes > MaxCostOutBytes {
			return fmt.Errorf("out_bytes %d: want 0 to %d", outBytes, MaxCostOutBytes)
		}
		if cpu, err = a.Int("cpu_us", 0); err != nil {
			return
		}
		if sleep, err = a.Int("sleep_us", 0); err != nil {
			return
		}
		if cpu < 0 || sleep < 0 || (cpu > 0) == (sleep > 0) {
			return fmt.Errorf("set exactly one of cpu_us and sleep_us (> 0)")
		}
		if cpu > MaxCostMicros || sleep > MaxCostMicros {
			return fmt.Errorf("at most %d µs per element", MaxCostMicros)
		}
		return nil
	}()
	if err != nil {
		return nil, argError("cost", err)
	}
	cpuD, sleepD := time.Duration(cpu)*time.Microsecond, time.Duration(sleep)*time.Microsecond
	var pattern []byte
	if outBytes > 0 {
		pattern = make([]byte, outBytes)
		x := uint64(0x9e3779b97f4a7c15)
		for i := range pattern {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			pattern[i] = byte(x)
		}
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		if sleepD > 0 {
			time.Sleep(sleepD)
		} else {
			spin(cpuD)
		}
		if pattern != nil {
			out := tensor.Element{Tensors: slices.Clone(e.Tensors)}
			out.Set(tensor.Tensor{Name: "payload", DType: tensor.Uint8, Shape: []int64{int64(len(pattern))}, Data: slices.Clone(pattern)})
			return out, nil
		}
		return e, nil
	}, nil
}

// spinSink keeps the compiler from removing spin's work.
var spinSink atomic.Uint64

// spin keeps the CPU busy for d.
func spin(d time.Duration) {
	var x uint64
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for i := uint64(0); i < 256; i++ {
			x = (x^i)*0x9e3779b97f4a7c15 + 1
		}
	}
	if x == 1 {
		spinSink.Add(1) // practically never; a data dependency on the loop's result
	}
}
