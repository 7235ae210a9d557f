package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/feedmesh/feedmesh/pipeline/fn"
)

// Normalized returns a deep copy of the spec with every default written in
// and function args in canonical form: the value that is fingerprinted and
// run. It does not validate.
func (s *Spec) Normalized() (*Spec, error) {
	out := &Spec{Seed: s.Seed, Autotune: s.Autotune, access: s.access}
	normalizeOrder(s, out)
	src := s.Source
	if src.Range != nil {
		r := *src.Range
		out.Source.Range = &r
	}
	if src.Files != nil {
		f := *src.Files
		f.Paths = append([]string(nil), f.Paths...)
		f.Fields = append([]Field(nil), f.Fields...)
		f.Columns = append([]string(nil), f.Columns...)
		if f.ObjectStore != nil {
			o := *f.ObjectStore
			f.ObjectStore = &o
		}
		out.Source.Files = &f
	}
	if src.Synthetic != nil {
		y := *src.Synthetic
		out.Source.Synthetic = &y
	}
	fillSourceDefaults(&out.Source)
	for i, op := range s.Ops {
		n, err := normalizeOp(op)
		if err != nil {
			return nil, fmt.Errorf("ops[%d].%s.args: %w", i, op.Name(), err)
		}
		out.Ops = append(out.Ops, n)
	}
	return out, nil
}

// normalizeOp is op as Normalized holds it: a deep copy with its defaults
// written in and its functions' args in canonical form.
func normalizeOp(op Op) (Op, error) {
	var out Op
	var err error
	if op.Map != nil {
		m := *op.Map
		if m.Args, err = normalizeArgs(m.Args); err != nil {
			return out, err
		}
		if m.Parallelism == 0 {
			m.Parallelism = 1
		}
		if m.Deterministic == nil {
			t := true
			m.Deterministic = &t
		} else {
			d := *m.Deterministic
			m.Deterministic = &d
		}
		out.Map = &m
	}
	if op.Filter != nil {
		f := *op.Filter
		if f.Args, err = normalizeArgs(f.Args); err != nil {
			return out, err
		}
		out.Filter = &f
	}
	if op.Shuffle != nil {
		x := *op.Shuffle
		out.Shuffle = &x
	}
	if op.Batch != nil {
		x := *op.Batch
		out.Batch = &x
	}
	if op.PaddedBatch != nil {
		x := *op.PaddedBatch
		out.PaddedBatch = &x
	}
	if op.BucketBySequenceLength != nil {
		x := *op.BucketBySequenceLength
		x.Boundaries = append([]int64(nil), x.Boundaries...)
		x.BatchSizes = append([]int64(nil), x.BatchSizes...)
		out.BucketBySequenceLength = &x
	}
	if op.Repeat != nil {
		x := *op.Repeat
		if x.Count != nil {
			c := *x.Count
			x.Count = &c
		} else {
			x.Forever = true
		}
		out.Repeat = &x
	}
	if op.Take != nil {
		x := *op.Take
		out.Take = &x
	}
	if op.Skip != nil {
		x := *op.Skip
		out.Skip = &x
	}
	if op.Prefetch != nil {
		x := *op.Prefetch
		if x.Buffer == 0 {
			x.Buffer = DefaultPrefetchBuffer
		}
		out.Prefetch = &x
	}
	if op.Cost != nil {
		x := *op.Cost
		out.Cost = &x
	}
	if op.Pack != nil {
		x := *op.Pack
		if x.EOS != nil {
			e := *x.EOS
			x.EOS = &e
		}
		if x.Strategy == "" {
			x.Strategy = PackConcat
		}
		if x.Strategy == PackFirstFit && x.MaxOpenBins == 0 {
			x.MaxOpenBins = DefaultPackOpenBins
		}
		out.Pack = &x
	}
	if op.Autocache != nil {
		x := *op.Autocache
		if x.Mode == "" {
			x.Mode = AutocacheAuto
		}
		out.Autocache = &x
	}
	return out, nil
}

// normalizeArgs returns the canonical form of a function's args.
func normalizeArgs(a fn.Args) (fn.Args, error) {
	if len(a) == 0 {
		return nil, nil
	}
	n, err := normalizeArg(a, 0)
	if err != nil {
		return nil, err
	}
	return fn.Args(n.(map[string]any)), nil
}

// maxArgDepth bounds the nesting of function arguments.
const maxArgDepth = 16

// normalizeArg converts a function argument to its canonical Go form, so
// that YAML, JSON and the builder agree (and so the fingerprint does):
// integers become int64 (uint64 above MaxInt64), other numbers float64,
// lists []any and mappings map[string]any. A number keeps its kind as
// written: 1 is an integer and 1.0 a float in both YAML and JSON.
func normalizeArg(v any, depth int) (any, error) {
	if depth > maxArgDepth {
		return nil, fmt.Errorf("arguments nested deeper than %d", maxArgDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return v, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
		return x, nil
	case float32:
		return float64(x), nil
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, nil
		}
		if n, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("bad number %s", x)
		}
		return f, nil
	case fn.Args:
		return normalizeArg(map[string]any(x), depth)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalizeArg(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		m, err := stringMap(x)
		if err != nil {
			return nil, err
		}
		return normalizeArg(m, depth)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeArg(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = n
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		xs := make([]any, rv.Len())
		for i := range xs {
			xs[i] = rv.Index(i).Interface()
		}
		return normalizeArg(xs, depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return normalizeArg(rv.Uint(), depth)
	}
	return nil, fmt.Errorf("unsupported argument type %T", v)
}
