package worker

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/bucketing"
	"github.com/feedmesh/feedmesh/tensor"
)

// seqBatch is a batch as bucket_by_sequence_length makes it: "x" padded to
// its longest row, and "x_length".
func seqBatch(t *testing.T, lens ...int32) pipeline.Element {
	t.Helper()
	longest := int32(0)
	for _, l := range lens {
		longest = max(longest, l)
	}
	x, err := tensor.FromInt32s("x", []int64{int64(len(lens)), int64(longest)}, make([]int32, len(lens)*int(longest)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tensor.FromInt32s(tensor.LengthsName("x"), nil, lens)
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.Element{Tensors: []tensor.Tensor{x, l}}
}

func TestWindowGrouper(t *testing.T) {
	op := &pipeline.BucketOp{Tensor: "x", Boundaries: []int64{4, 8}}
	for _, pad := range []bool{false, true} {
		g, err := newWindowGrouper(2, op, pad)
		if err != nil {
			t.Fatal(err)
		}
		var windows []bucketing.Window[coordBatch]
		for _, lens := range [][]int32{{2, 3}, {5, 7}, {1}, {9, 9, 2}} {
			w, ok, err := g.add(seqBatch(t, lens...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				windows = append(windows, w)
			}
		}
		// {2,3} and {1} fill bucket 0's window; {5,7} (bucket 1) and
		// {9,9,2} (bucket 2) wait for a second batch.
		if len(windows) != 1 || windows[0].Bucket != 0 || len(windows[0].Batches) != 2 {
			t.Fatalf("pad %v: complete windows %+v, want one of bucket 0", pad, windows)
		}
		b0, b1 := windows[0].Batches[0], windows[0].Batches[1]
		if b0.tokens != 5 || b0.padded != 6 || b1.tokens != 1 || b1.padded != 1 || b0.filler || b1.filler {
			t.Errorf("pad %v: measured %+v, %+v; want tokens 5 padded 6, tokens 1 padded 1", pad, b0, b1)
		}
		rest := g.flush()
		if !pad {
			if len(rest) != 0 {
				t.Errorf("without PadFinalRound the partial windows are dropped, got %d", len(rest))
			}
			continue
		}
		if len(rest) != 2 || rest[0].Bucket != 1 || rest[1].Bucket != 2 {
			t.Fatalf("PadFinalRound: flushed %+v, want windows of buckets 1 and 2", rest)
		}
		for _, w := range rest {
			full, filler := w.Batches[0], w.Batches[1]
			if full.filler || !filler.filler || filler.tokens != 0 {
				t.Errorf("bucket %d: batches %+v, want a real batch then a filler", w.Bucket, w.Batches)
			}
			// The filler has the real batch's tensors with no rows.
			if len(filler.el.Tensors) != len(full.el.Tensors) {
				t.Fatalf("bucket %d: filler tensors %+v", w.Bucket, filler.el.Tensors)
			}
			for i, ft := range filler.el.Tensors {
				rt := full.el.Tensors[i]
				if ft.Name != rt.Name || ft.DType != rt.DType || ft.Shape[0] != 0 || len(ft.Data) != 0 || len(ft.Shape) != len(rt.Shape) {
					t.Errorf("bucket %d: filler tensor %+v for %+v", w.Bucket, ft, rt)
				}
			}
		}
	}
}

func TestWindowGrouperNeedsLengths(t *testing.T) {
	g, err := newWindowGrouper(2, &pipeline.BucketOp{Tensor: "y", Boundaries: []int64{4}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.add(seqBatch(t, 1, 2), nil); err == nil || !strings.Contains(err.Error(), `"y_length"`) {
		t.Fatalf("a batch without the lengths tensor: %v", err)
	}
}

func TestCoordinatedOp(t *testing.T) {
	if _, err := CoordinatedOp(&pipeline.Spec{}); err == nil || !strings.Contains(err.Error(), "bucket_by_sequence_length") {
		t.Fatalf("a spec without a bucket op: %v", err)
	}
	op := &pipeline.BucketOp{Tensor: "x"}
	got, err := CoordinatedOp(&pipeline.Spec{Ops: []pipeline.Op{{BucketBySequenceLength: op}}})
	if err != nil || got != op {
		t.Fatalf("CoordinatedOp = %v, %v", got, err)
	}
}
