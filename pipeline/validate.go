package pipeline

import (
	"fmt"
	"strings"

	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// Bounds on spec numbers, so that a spec cannot ask for unbounded work or
// memory by accident.
const (
	// MaxParallelism bounds a map op's parallelism.
	MaxParallelism = 1024
	// ParallelismAuto is a map's parallelism when the spec says
	// `parallelism: auto`: the pipeline sets it live from its own
	// measurements (autotune.go).
	ParallelismAuto = -1
	// MaxCostMicros bounds a cost op's per-element CPU or sleep time (10 s).
	MaxCostMicros = 10_000_000
	// DefaultPrefetchBuffer is a prefetch op's buffer when the spec does
	// not give one.
	DefaultPrefetchBuffer = 2
	// MaxPrefetchBuffer bounds a prefetch op's buffer.
	MaxPrefetchBuffer = 1 << 16
	// MaxShuffleBuffer bounds a shuffle op's buffer.
	MaxShuffleBuffer = 1 << 26
	// MaxBatchSize bounds batch, padded_batch and bucket batch sizes.
	MaxBatchSize = 1 << 24
)

// ValidationError lists everything wrong with a spec, each problem as
// "path: what is wrong" (`ops[2].shuffle.buffer: must be > 0`).
type ValidationError struct {
	Problems []string
	// causes are the errors behind problems that have one (a function's
	// file the data-access policy refused: errors.Is(err,
	// objstore.ErrNotAllowed)).
	causes []error
}

// Error joins the problems with "; ".
func (e *ValidationError) Error() string {
	return strings.Join(e.Problems, "; ")
}

// Unwrap returns the errors behind the problems that have one.
func (e *ValidationError) Unwrap() []error { return e.causes }

// Validate checks the spec: exactly one source and one op per entry, every
// field in range, every function registered and its args accepted by the
// function's factory. Nothing is opened or read: a function's file (a
// tokenizer) is opened, and the spec's files listed, when the spec is
// opened (Splits, Open). The error is a *ValidationError.
func (s *Spec) Validate() error {
	_, err := compile(s, nil)
	return err
}

// compiled is a validated, normalized spec with its functions built.
type compiled struct {
	spec   *Spec
	source *compiledSource
	ops    []compiledOp
}

type compiledOp struct {
	op     *Op
	name   string // "map(tokenize_whitespace)", "shuffle", …
	mapFn  fn.MapFn
	filter fn.FilterFn
	seed   uint64
}

// compile checks a spec and builds its functions, which open the files
// their args name through files; nil only checks (nothing is opened, and
// the compiled spec must not be run).
func compile(s *Spec, files *objstore.Access) (*compiled, error) {
	var problems []string
	var causes []error
	add := func(path, format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	addErr := func(path string, err error) {
		add(path, "%v", err)
		causes = append(causes, err)
	}
	n, err := s.Normalized()
	if err != nil {
		return nil, &ValidationError{Problems: []string{err.Error()}}
	}
	c := &compiled{spec: n}
	c.source = compileSource(&n.Source, add, files)
	for i := range n.Ops {
		op := &n.Ops[i]
		c.ops = append(c.ops, compileOp(i, op, n.Seed, add, addErr, files))
	}
	validateAutocachePlacement(n.Ops, add)
	checkOrderFields(n, add)
	if n.Order == OrderDeterministic && c.source != nil {
		c.source = validateOrder(n, c.source, add)
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems, causes: causes}
	}
	return c, nil
}

// compileOp checks op i of the spec, and builds its function when it is a
// map or a filter.
func compileOp(i int, op *Op, specSeed uint64, add func(path, format string, args ...any), addErr func(string, error), files *objstore.Access) compiledOp {
	names := op.names()
	at := fmt.Sprintf("ops[%d]", i)
	co := compiledOp{op: op}
	if len(names) != 1 {
		if len(names) == 0 {
			add(at, "empty op; want exactly one of %s", strings.Join(opNames, ", "))
		} else {
			add(at, "has %d ops (%s); want exactly one per list entry", len(names), strings.Join(names, ", "))
		}
		return co
	}
	co.name = names[0]
	at += "." + names[0]
	switch {
	case op.Map != nil:
		co.name = "map(" + op.Map.Fn + ")"
		co.seed = opSeed(op.Map.Seed, specSeed, i)
		co.mapFn = compileMap(op.Map, at, add, addErr, files)
	case op.Filter != nil:
		co.name = "filter(" + op.Filter.Fn + ")"
		co.seed = opSeed(op.Filter.Seed, specSeed, i)
		co.filter = compileFilter(op.Filter, at, add)
	default:
		checkOpFields(op, at, add)
	}
	return co
}

// compileMap checks a map op at path at and builds its function (nil when
// it cannot).
func compileMap(m *MapOp, at string, add func(path, format string, args ...any), addErr func(string, error), files *objstore.Access) fn.MapFn {
	if (m.Parallelism < 1 || m.Parallelism > MaxParallelism) && m.Parallelism != ParallelismAuto {
		add(at+".parallelism", "must be in [1, %d], or auto", MaxParallelism)
	}
	if m.Fn == "" {
		add(at+".fn", "missing; known map functions: %s", strings.Join(fn.MapNames(), ", "))
		return nil
	}
	f, ok := fn.LookupFileMap(m.Fn)
	if !ok {
		add(at+".fn", "unknown map function %q (known: %s)", m.Fn, strings.Join(fn.MapNames(), ", "))
		return nil
	}
	mf, err := buildSafely(func() (fn.MapFn, error) { return f(files, m.Args) })
	if err != nil {
		addErr(at+".args", err)
	} else if mf == nil {
		add(at+".fn", "map function %q built nothing", m.Fn)
	}
	return mf
}

// compileFilter checks a filter op at path at and builds its function
// (nil when it cannot).
func compileFilter(f *FilterOp, at string, add func(path, format string, args ...any)) fn.FilterFn {
	if f.Fn == "" {
		add(at+".fn", "missing; known filter functions: %s", strings.Join(fn.FilterNames(), ", "))
		return nil
	}
	ff, ok := fn.LookupFilter(f.Fn)
	if !ok {
		add(at+".fn", "unknown filter function %q (known: %s)", f.Fn, strings.Join(fn.FilterNames(), ", "))
		return nil
	}
	flt, err := buildSafely(func() (fn.FilterFn, error) { return ff(f.Args) })
	if err != nil {
		add(at+".args", "%v", err)
	} else if flt == nil {
		add(at+".fn", "filter function %q built nothing", f.Fn)
	}
	return flt
}

// checkOpFields checks the fields of an op that is neither a map nor a
// filter, at path at, against their bounds.
func checkOpFields(op *Op, at string, add func(path, format string, args ...any)) {
	positive := func(field string, v int64) {
		if v <= 0 {
			add(at+"."+field, "must be > 0")
		}
	}
	atMost := func(field string, v, limit int64) {
		if v > limit {
			add(at+"."+field, "must be <= %d", limit)
		}
	}
	nonNegative := func(field string, v int64) {
		if v < 0 {
			add(at+"."+field, "must be >= 0")
		}
	}
	switch {
	case op.Shuffle != nil:
		positive("buffer", op.Shuffle.Buffer)
		atMost("buffer", op.Shuffle.Buffer, MaxShuffleBuffer)
	case op.Batch != nil:
		positive("size", op.Batch.Size)
		atMost("size", op.Batch.Size, MaxBatchSize)
	case op.PaddedBatch != nil:
		positive("size", op.PaddedBatch.Size)
		atMost("size", op.PaddedBatch.Size, MaxBatchSize)
	case op.BucketBySequenceLength != nil:
		b := op.BucketBySequenceLength
		if b.Tensor == "" {
			add(at+".tensor", "missing: name the tensor whose length selects the bucket")
		}
		if err := bucketing.Validate(b.Boundaries, b.BatchSizes); err != nil {
			add(at, "%v", err)
		}
		for j, size := range b.BatchSizes {
			atMost(fmt.Sprintf("batch_sizes[%d]", j), size, MaxBatchSize)
		}
	case op.Repeat != nil:
		r := op.Repeat
		if r.Count != nil && r.Forever {
			add(at, "set count or forever, not both")
		} else if r.Count != nil {
			nonNegative("count", *r.Count)
		}
	case op.Take != nil:
		nonNegative("count", op.Take.Count)
	case op.Skip != nil:
		nonNegative("count", op.Skip.Count)
	case op.Prefetch != nil:
		positive("buffer", op.Prefetch.Buffer)
		atMost("buffer", op.Prefetch.Buffer, MaxPrefetchBuffer)
	case op.Cost != nil:
		c := op.Cost
		nonNegative("cpu_us", c.CPUMicros)
		nonNegative("sleep_us", c.SleepMicros)
		if (c.CPUMicros > 0) == (c.SleepMicros > 0) {
			add(at, "set exactly one of cpu_us and sleep_us (> 0)")
		}
		if c.CPUMicros > MaxCostMicros || c.SleepMicros > MaxCostMicros {
			add(at, "at most %d µs per element", MaxCostMicros)
		}
	case op.Pack != nil:
		validatePack(op.Pack, at, add)
	case op.Autocache != nil:
		switch op.Autocache.Mode {
		case AutocacheAuto, AutocacheCompute, AutocacheCache:
		default:
			add(at+".mode", "unknown mode %q (want auto, compute or cache)", op.Autocache.Mode)
		}
	}
}

// buildSafely runs a function factory, turning a panic in user code into a
// validation error.
func buildSafely[F any](build func() (F, error)) (f F, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("function factory panicked: %v", r)
		}
	}()
	return build()
}

// opSeed is the seed a random function of op i gets: its own, or one
// derived from the dataset seed and the op's position.
func opSeed(own, specSeed uint64, i int) uint64 {
	if own != 0 {
		return own
	}
	return mix64(specSeed ^ 0x6a09e667f3bcc909*uint64(i+1))
}

// mix64 is SplitMix64's finalizer: a bijective scrambler for seeds.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
