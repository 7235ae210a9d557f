package worker

import (
	"errors"
	"fmt"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// windowGrouper turns a coordinated task's bucketed batches into round
// windows: m batches of one bucket each (bucketing.Grouper), measured from
// the lengths tensor bucket_by_sequence_length adds. At the end of data it
// flushes the partial windows: padded out with empty fillers when the job
// has PadFinalRound, dropped otherwise. It is pure.
type windowGrouper struct {
	lengthName string
	boundaries []int64
	pad        bool
	g          *bucketing.Grouper[coordBatch]
	templates  map[int]pipeline.Element // first batch of each bucket: the fillers' shape
}

// CoordinatedOp returns the bucket op a coordinated spec ends in, or an
// error that says what to change.
func CoordinatedOp(spec *pipeline.Spec) (*pipeline.BucketOp, error) {
	if len(spec.Ops) == 0 || spec.Ops[len(spec.Ops)-1].BucketBySequenceLength == nil {
		return nil, errors.New("coordinated: the dataset spec must end in bucket_by_sequence_length (rounds group batches of one bucket)")
	}
	return spec.Ops[len(spec.Ops)-1].BucketBySequenceLength, nil
}

func newWindowGrouper(m int, op *pipeline.BucketOp, pad bool) (*windowGrouper, error) {
	// (m-1) batches per bucket never block the grouper.
	g, err := bucketing.NewGrouper[coordBatch](m, (m-1)*(len(op.Boundaries)+1))
	if err != nil {
		return nil, err
	}
	return &windowGrouper{lengthName: tensor.LengthsName(op.Tensor), boundaries: op.Boundaries, pad: pad,
		g: g, templates: map[int]pipeline.Element{}}, nil
}

// add groups el, whose elements are prov (exactly-once; nil otherwise);
// ok when it completes a window.
func (wg *windowGrouper) add(el pipeline.Element, prov []batch.ProvRange) (w bucketing.Window[coordBatch], ok bool, err error) {
	b, bucket, err := wg.measure(el)
	if err != nil {
		return w, false, err
	}
	b.prov = prov
	if _, ok := wg.templates[bucket]; !ok {
		wg.templates[bucket] = el
	}
	return wg.g.Add(bucket, b)
}

// flush returns the partial windows at the end of data, padded with
// fillers or none (dropped), as the job says.
func (wg *windowGrouper) flush() []bucketing.Window[coordBatch] {
	pad := func(bucket int) coordBatch {
		tmpl := wg.templates[bucket]
		return coordBatch{el: tmpl.Empty(), filler: true}
	}
	return wg.g.Flush(pad, !wg.pad)
}

// measure finds a batch's bucket and token counts from its lengths tensor.
func (wg *windowGrouper) measure(el pipeline.Element) (coordBatch, int, error) {
	lt, ok := el.Get(wg.lengthName)
	if !ok {
		return coordBatch{}, 0, fmt.Errorf("coordinated: batch has no %q tensor (is bucket_by_sequence_length the last op?)", wg.lengthName)
	}
	ls, err := lt.Int32s()
	if err != nil {
		return coordBatch{}, 0, fmt.Errorf("coordinated: %s: %w", wg.lengthName, err)
	}
	lens := make([]int64, len(ls))
	var tokens int64
	for i, l := range ls {
		lens[i] = int64(max(l, 0))
		tokens += lens[i]
	}
	var longest int64
	for _, l := range lens {
		longest = max(longest, l)
	}
	return coordBatch{el: el, tokens: tokens, padded: bucketing.PaddedTokens(lens)}, bucketing.Index(longest, wg.boundaries), nil
}
