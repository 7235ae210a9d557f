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

// TestOrderConsumerShares: consumer i of N's splits, read in any order
// and put in split order, are the whole job's global batches g with
// g mod N == i (batch k of window w being global batch
// GlobalBatches(w)+k); consumer 0 of 1 is the whole job, fingerprint and
// all.
func TestOrderConsumerShares(t *testing.T) {
	for _, drop := range []bool{false, true} {
		whole := orderSpec(1000, 10, drop)
		byWindow := readWindows(t, whole, 2)
		if len(byWindow) != 21 { // 63 blocks of 16, 3 a window
			t.Fatalf("the whole job has %d windows, want 21", len(byWindow))
		}
		var global [][]int64
		for w := range int64(len(byWindow)) {
			global = append(global, byWindow[w]...)
		}
		one := orderSpec(1000, 10, drop)
		one.OrderConsumers = 1
		fw, _ := whole.Fingerprint()
		if f1, err := one.Fingerprint(); err != nil || f1 != fw {
			t.Fatalf("consumer 0 of 1's fingerprint %s, the whole's %s (%v)", f1, fw, err)
		}
		for _, n := range []int64{2, 3, 5} {
			for i := range n {
				s := orderSpec(1000, 10, drop)
				s.OrderConsumer, s.OrderConsumers = i, n
				got := readWindows(t, s, 2)
				var mine [][]int64
				for w := range int64(len(byWindow)) {
					mine = append(mine, got[w]...)
				}
				var want [][]int64
				for g := i; g < int64(len(global)); g += n {
					want = append(want, global[g])
				}
				if fmt.Sprint(mine) != fmt.Sprint(want) {
					t.Fatalf("drop %v: consumer %d of %d: %d batches %v, want %d: %v", drop, i, n, len(mine), mine, len(want), want)
				}
			}
		}
	}
}
