package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// readWindows is spec's batches (their ids) for epoch, its splits read
// in reverse order, grouped per split.
func readWindows(t *testing.T, spec *Spec, epoch int64) map[int64][][]int64 {
	t.Helper()
	list, err := ListSplits(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][][]int64{}
	all := list.All()
	for j := len(all) - 1; j >= 0; j-- {
		it, err := OpenList(context.Background(), spec, SplitList{}, Options{Provider: &listProvider{splits: all[j : j+1], epoch: epoch}})
		if err != nil {
			t.Fatal(err)
		}
		for {
			el, err := it.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			v, err := el.Tensors[0].Int64s()
			if err != nil {
				t.Fatal(err)
			}
			out[all[j].ID] = append(out[all[j].ID], v)
		}
		it.Close()
	}
	return out
}

// TestOrderConsumerShares: consumer i of N's splits are the layout's
// windows w mod N == i (split s is window s·N+i), each yielding the
// whole job's batches of that window; consumer 0 of 1 is the whole job,
// fingerprint and all.
func TestOrderConsumerShares(t *testing.T) {
	whole := orderSpec(1000, 10, false)
	want := readWindows(t, whole, 2)
	if len(want) != 21 { // 63 blocks of 16, 3 a window
		t.Fatalf("the whole job has %d windows, want 21", len(want))
	}
	one := orderSpec(1000, 10, false)
	one.OrderConsumers = 1
	fw, _ := whole.Fingerprint()
	if f1, err := one.Fingerprint(); err != nil || f1 != fw {
		t.Fatalf("consumer 0 of 1's fingerprint %s, the whole's %s (%v)", f1, fw, err)
	}
	for _, n := range []int64{2, 3, 5} {
		seen := map[int64]bool{}
		for i := range n {
			s := orderSpec(1000, 10, false)
			s.OrderConsumer, s.OrderConsumers = i, n
			got := readWindows(t, s, 2)
			for sp, bs := range got {
				w := sp*n + i
				if seen[w] {
					t.Fatalf("window %d twice", w)
				}
				seen[w] = true
				if fmt.Sprint(bs) != fmt.Sprint(want[w]) {
					t.Fatalf("consumer %d of %d, split %d: %v, window %d of the whole: %v", i, n, sp, bs, w, want[w])
				}
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("%d consumers: %d windows, the whole has %d", n, len(seen), len(want))
		}
	}
}
