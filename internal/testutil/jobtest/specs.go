package jobtest

import (
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

func init() {
	// A random op: r drawn from the element's generator (seeded by its
	// epoch, split and index), so that a test can tell a recomputed
	// element from a cached or resumed one.
	fn.RegisterMap("test_autocache_rand", func(c *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		e.Set(tensor.ScalarInt64("r", c.Rand().Int64()))
		return e, nil
	})
}

// RangeSpec is the dataset 0..n-1 in splits of splitSize, batched by batch.
func RangeSpec(n, splitSize, batch int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: splitSize}})
	if batch > 0 {
		s.Batch(batch, false)
	}
	return s
}

// SlowSpec spends sleepUs per element so a job lasts long enough to break
// things in the middle of it.
func SlowSpec(n, splitSize, batch, sleepUs int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: splitSize}})
	s.Cost(0, sleepUs)
	s.Batch(batch, false)
	return s
}

// ShuffledSpec is issue 20's pipeline: it shuffles across splits, maps,
// spends sleepUs per element and batches, over range [0, n).
func ShuffledSpec(n, splitSize, batch, sleepUs int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: splitSize}})
	s.Shuffle(64, 7)
	s.Map("cast", fn.Args{"tensor": "value", "dtype": "int64"}, 2)
	s.Cost(0, sleepUs)
	s.Batch(batch, false)
	return s
}

// TextSpec is a finite heavy-tailed synthetic text corpus, tokenized and
// bucketed: the shape of a coordinated job's pipeline.
func TextSpec(count, splitSize int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: count, Seed: 3, SplitSize: splitSize, MaxWords: 512}))
	s.Map("tokenize_whitespace", fn.Args{"vocab_size": 1000}, 1)
	s.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{16, 32, 64, 128}, BatchSizes: []int64{16, 8, 4, 2, 1}})
	return s
}
