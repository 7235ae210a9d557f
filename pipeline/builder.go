package pipeline

import "github.com/feedmesh/feedmesh/pipeline/fn"

// The builder: NewSpec(source) followed by chained op methods builds the
// same Spec value a YAML or JSON file decodes to, e.g.
//
//	spec := pipeline.NewSpec(pipeline.FromFiles("lines", "corpus/*.txt")).
//		Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 4).
//		Shuffle(4096, 7).
//		Batch(32, false)
//
// The methods append to and return the receiver; they do not validate (call
// Validate, or let Open do it).

// NewSpec starts a spec reading from src.
func NewSpec(src Source) *Spec { return &Spec{Source: src} }

// FromRange is a range source [start, stop) with the given step.
func FromRange(start, stop, step int64) Source {
	return Source{Range: &RangeSource{Start: start, Stop: stop, Step: step}}
}

// FromFiles is a files source of the given format over the given globs.
func FromFiles(format string, paths ...string) Source {
	return Source{Files: &FilesSource{Format: format, Paths: paths}}
}

// FromSynthetic is a synthetic source.
func FromSynthetic(s SyntheticSource) Source { return Source{Synthetic: &s} }

// Then appends any op, for options the shorthand methods do not take.
func (s *Spec) Then(op Op) *Spec {
	s.Ops = append(s.Ops, op)
	return s
}

// Map appends a map op; parallelism <= 1 runs it inline.
func (s *Spec) Map(name string, args fn.Args, parallelism int) *Spec {
	return s.Then(Op{Map: &MapOp{Fn: name, Args: args, Parallelism: parallelism}})
}

// Filter appends a filter op.
func (s *Spec) Filter(name string, args fn.Args) *Spec {
	return s.Then(Op{Filter: &FilterOp{Fn: name, Args: args}})
}

// Shuffle appends a shuffle op.
func (s *Spec) Shuffle(buffer int64, seed uint64) *Spec {
	return s.Then(Op{Shuffle: &ShuffleOp{Buffer: buffer, Seed: seed}})
}

// Batch appends a batch op.
func (s *Spec) Batch(size int64, dropRemainder bool) *Spec {
	return s.Then(Op{Batch: &BatchOp{Size: size, DropRemainder: dropRemainder}})
}

// PaddedBatch appends a padded_batch op.
func (s *Spec) PaddedBatch(size int64, padValue float64) *Spec {
	return s.Then(Op{PaddedBatch: &PaddedBatchOp{Size: size, PadValue: padValue}})
}

// Pack appends a pack op.
func (s *Spec) Pack(p PackOp) *Spec { return s.Then(Op{Pack: &p}) }

// BucketBySequenceLength appends a bucket_by_sequence_length op.
func (s *Spec) BucketBySequenceLength(b BucketOp) *Spec {
	return s.Then(Op{BucketBySequenceLength: &b})
}

// Repeat appends a repeat op that re-runs its input count times.
func (s *Spec) Repeat(count int64) *Spec {
	return s.Then(Op{Repeat: &RepeatOp{Count: &count}})
}

// RepeatForever appends a repeat op without end.
func (s *Spec) RepeatForever() *Spec {
	return s.Then(Op{Repeat: &RepeatOp{Forever: true}})
}

// Take appends a take op.
func (s *Spec) Take(count int64) *Spec { return s.Then(Op{Take: &TakeOp{Count: count}}) }

// Skip appends a skip op.
func (s *Spec) Skip(count int64) *Spec { return s.Then(Op{Skip: &SkipOp{Count: count}}) }

// Prefetch appends a prefetch op.
func (s *Spec) Prefetch(buffer int64) *Spec {
	return s.Then(Op{Prefetch: &PrefetchOp{Buffer: buffer}})
}

// Cost appends a cost op spending cpuMicros of CPU and then sleeping
// sleepMicros per element (set exactly one).
func (s *Spec) Cost(cpuMicros, sleepMicros int64) *Spec {
	return s.Then(Op{Cost: &CostOp{CPUMicros: cpuMicros, SleepMicros: sleepMicros}})
}

// Autocache appends an autocache op in mode auto: the ops so far are a
// prefix whose output the mesh may cache (AutocacheOp).
func (s *Spec) Autocache() *Spec { return s.Then(Op{Autocache: &AutocacheOp{}}) }

// AutocacheMode appends an autocache op with the given mode (auto,
// compute or cache).
func (s *Spec) AutocacheMode(mode string) *Spec {
	return s.Then(Op{Autocache: &AutocacheOp{Mode: mode}})
}
