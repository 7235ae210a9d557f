package diagnose

import (
	"fmt"
	"math"

	"github.com/feedmesh/feedmesh/pipeline"
)

// Cache is a cache recommendation: keep one epoch of the output of a
// prefix of the pipeline in memory and read it back in later epochs.
type Cache struct {
	// AfterIndex is the index in Spec.Ops of the prefix's last op (-1: the
	// source alone) and AfterOp its name.
	AfterIndex int    `json:"after_index"`
	AfterOp    string `json:"after_op"`
	// Bytes is one epoch of the prefix's output; Estimated says the epoch's
	// size was estimated rather than counted.
	Bytes       int64 `json:"bytes"`
	Estimated   bool  `json:"estimated"`
	MemoryBytes int64 `json:"memory_bytes"`
	// PredictedElementsPerSecond is the LP's throughput once the cache is
	// full (after the first epoch): the cached ops then cost nothing.
	// Omitted when nothing measurable is left to bound it.
	PredictedElementsPerSecond float64 `json:"predicted_elements_per_second,omitempty"`
}

// deterministicFns are the built-in functions whose output depends only on
// their input. random_crop and random_flip are not; functions a program
// registers are unknown, so they are treated as random.
var deterministicFns = map[string]bool{
	"tokenize_whitespace": true, "tokenize_bytes": true, "tokenize_bpe": true, "tokenize_tiktoken": true, "length_between": true,
	"decode_image": true, "resize": true, "normalize": true,
	"cast": true, "json_field": true, "cost": true,
}

// Deterministic reports whether the map or filter function named fn is
// known to be deterministic, so that its output can be cached.
func Deterministic(fn string) bool { return deterministicFns[fn] }

// randomArgs are the arguments that make a deterministic function random
// when true: normalize's random_flip.
var randomArgs = map[string]string{"normalize": "random_flip"}

// deterministicMap is Deterministic for a map with its arguments.
func deterministicMap(m *pipeline.MapOp) bool {
	if !Deterministic(m.Fn) {
		return false
	}
	if arg, ok := randomArgs[m.Fn]; ok {
		if v, set := m.Args[arg]; set && v != false {
			return false
		}
	}
	return true
}

// cacheable reports whether op may be part of a cached prefix, and if not why.
func cacheable(op pipeline.Op) (bool, string) {
	switch {
	case op.Shuffle != nil:
		return false, "shuffle is random"
	case op.Repeat != nil:
		return false, "repeat: a cache holds one epoch"
	case op.Map != nil && !deterministicMap(op.Map):
		return false, fmt.Sprintf("map(%s) is random or unknown", op.Map.Fn)
	case op.Filter != nil && !Deterministic(op.Filter.Fn):
		return false, fmt.Sprintf("filter(%s) is random or unknown", op.Filter.Fn)
	}
	return true, ""
}

// recommendCache picks the longest cacheable prefix whose epoch fits the
// budget, and says why (or why none).
func recommendCache(spec *pipeline.Spec, run Run, nodes []node, b Budget) (*Cache, string) {
	if b.MemoryBytes <= 0 {
		return nil, "no memory budget given (--memory)"
	}
	if run.EpochSourceElements <= 0 {
		return nil, "the size of an epoch is unknown"
	}
	src := run.Ops[0].ElementsOut
	if src <= 0 {
		return nil, "the source gave nothing"
	}
	var best *Cache
	var tooBig []string
	stop := ""
	for k := 0; k < len(run.Ops); k++ {
		if k > 0 {
			op := spec.Ops[k-1]
			if ok, why := cacheable(op); !ok {
				stop = fmt.Sprintf("; nothing after ops[%d] can be cached (%s)", k-1, why)
				break
			}
			if op.Prefetch != nil {
				continue // same output as its input
			}
		}
		o := run.Ops[k]
		if o.ElementsOut <= 0 {
			continue
		}
		elems := float64(run.EpochSourceElements) * float64(o.ElementsOut) / float64(src)
		bytes := elems * float64(o.BytesOut) / float64(o.ElementsOut)
		if bytes > float64(b.MemoryBytes) {
			tooBig = append(tooBig, fmt.Sprintf("after %s: %s", o.Name, pipeline.HumanBytes(bytes)))
			continue
		}
		best = &Cache{AfterIndex: k - 1, AfterOp: o.Name, Bytes: int64(math.Ceil(bytes)),
			Estimated: run.EpochEstimated, MemoryBytes: b.MemoryBytes}
		rest := append([]node(nil), nodes...)
		for j := 0; j <= k; j++ {
			rest[j].load = 0
		}
		if x := lpOptimum(rest, b.Cores); !math.IsInf(x, 1) {
			best.PredictedElementsPerSecond = x
		}
	}
	if best == nil {
		why := fmt.Sprintf("no cacheable prefix fits %s", pipeline.HumanBytes(float64(b.MemoryBytes)))
		if len(tooBig) > 0 {
			why += " (" + joinMax(tooBig, 4) + ")"
		}
		return nil, why + stop
	}
	why := fmt.Sprintf("the longest cacheable prefix that fits %s", pipeline.HumanBytes(float64(b.MemoryBytes)))
	if len(tooBig) > 0 {
		why += "; these do not: " + joinMax(tooBig, 4)
	}
	return best, why + stop
}

func joinMax(s []string, n int) string {
	out := ""
	for i, x := range s {
		if i == n {
			return out + ", …"
		}
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
