package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

func init() {
	// test_fill: adds "pix", 64 KiB of uint8 each the value's low byte.
	fn.RegisterMap("test_fill", func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		e.Set(tensor.Tensor{Name: "pix", DType: tensor.Uint8, Shape: []int64{64 << 10}, Data: bytes.Repeat([]byte{byte(value(e))}, 64<<10)})
		return e, nil
	})
}

// Batches handed back (Recycle) back later batches of a pipeline that
// ends in batch (a prefetch after it aside), and every batch still holds
// its own elements; other pipelines keep nothing.
func TestRecycleReusesBatchBuffers(t *testing.T) {
	spec := rng(200, 50).Map("test_fill", nil, 1).Batch(32, false).Prefetch(1)
	it, err := OpenWithOptions(context.Background(), spec, mustSplits(t, spec), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	seen := map[*byte]bool{}
	reused, next := 0, int64(0)
	for {
		e, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pix, _ := e.Get("pix")
		if len(pix.Data) >= RecycleMinBytes && seen[&pix.Data[0]] {
			reused++
		}
		if len(pix.Data) > 0 {
			seen[&pix.Data[0]] = true
		}
		rows := int(pix.Shape[0])
		for r := range rows {
			row := pix.Data[r*(64<<10) : (r+1)*(64<<10)]
			if want := byte(next); row[0] != want || row[len(row)-1] != want || bytes.Count(row, []byte{want}) != len(row) {
				t.Fatalf("batch row %d (element %d) holds %d, want %d", r, next, row[0], want)
			}
			next++
		}
		it.(Recycler).Recycle(e)
	}
	if next != 200 || reused < 3 {
		t.Errorf("read %d elements; %d batches reused a buffer handed back", next, reused)
	}
	for _, s := range []*Spec{
		rng(10, 5).Map("test_fill", nil, 1),
		rng(10, 5).Map("test_fill", nil, 1).PaddedBatch(4, 0),
		rng(10, 5).Map("test_fill", nil, 1).Batch(4, false).Map("test_jitter", nil, 1),
	} {
		c, err := compile(s, s.files())
		if err != nil {
			t.Fatal(err)
		}
		if newSpares(c.ops) != nil {
			t.Errorf("%v: keeps spares, though it does not end in batch", s.Ops)
		}
	}
}
