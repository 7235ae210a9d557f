package pipeline

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// orderSpec is a deterministic spec over the ids [0, n).
func orderSpec(n, batch int64, drop bool) *Spec {
	return &Spec{
		Source: Source{Range: &RangeSource{Start: 0, Stop: n, SplitSize: 7}},
		Ops:    []Op{{Batch: &BatchOp{Size: batch, DropRemainder: drop}}},
		Seed:   42, Order: OrderDeterministic, OrderBlock: 16, OrderWindow: 3,
	}
}

// listProvider hands out splits in the given order, for epoch.
type listProvider struct {
	splits []Split
	epoch  int64
	i      int
}

func (p *listProvider) Next(context.Context) (ProvidedSplit, error) {
	if p.i >= len(p.splits) {
		return ProvidedSplit{}, io.EOF
	}
	p.i++
	return ProvidedSplit{Split: p.splits[p.i-1], Epoch: p.epoch}, nil
}

// TestOrderWindowsAsSplits: a deterministic spec's splits are its
// windows; reading them in any order yields, for each window, the
// layout's elements in its order, cut into batches that never span two
// windows (the short last batch of a window kept, or dropped).
func TestOrderWindowsAsSplits(t *testing.T) {
	for _, drop := range []bool{false, true} {
		spec := orderSpec(1000, 10, drop)
		plan, ok, err := OrderOf(spec)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		list, err := ListSplits(spec)
		if err != nil {
			t.Fatal(err)
		}
		l, err := plan.Layout(3)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(list.Len()) != l.Windows() {
			t.Fatalf("%d splits, %d windows", list.Len(), l.Windows())
		}
		all := list.All()
		// Reverse order: the content must not depend on it.
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
		it, err := OpenList(context.Background(), spec, SplitList{}, Options{Provider: &listProvider{splits: all, epoch: 3}})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]int64
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
			got = append(got, v)
		}
		it.Close()
		var want [][]int64
		for w := int64(len(all)) - 1; w >= 0; w-- {
			ids, err := l.Window(uint64(w))
			if err != nil {
				t.Fatal(err)
			}
			if n := plan.WindowBatches(l, uint64(w)); n == 0 {
				t.Fatalf("window %d: no batches", w)
			}
			for k := 0; k < len(ids); k += 10 {
				b := ids[k:min(k+10, len(ids))]
				if drop && len(b) < 10 {
					continue
				}
				row := make([]int64, len(b))
				for i, id := range b {
					row[i] = int64(id)
				}
				want = append(want, row)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("drop %v: %d batches, want %d", drop, len(got), len(want))
		}
		for i := range want {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("drop %v: batch %d: %v, want %v", drop, i, got[i], want[i])
			}
			for j := range want[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("drop %v: batch %d: %v, want %v", drop, i, got[i], want[i])
				}
			}
		}
	}
}

// TestOrderBlockUnderAny: order_block and order_window are inert under
// order any (a consumer may ask for deterministic order after the spec
// is parsed), and not in its fingerprint.
func TestOrderBlockUnderAny(t *testing.T) {
	a, b := orderSpec(100, 10, false), orderSpec(100, 10, false)
	a.Order, b.Order, b.OrderBlock, b.OrderWindow = "", "any", 0, 0
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	fa, err := a.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.Fingerprint()
	if err != nil || fa != fb {
		t.Fatalf("fingerprints %s and %s (%v)", fa, fb, err)
	}
	if _, ok, _ := OrderOf(a); ok {
		t.Fatal("order any has an order plan")
	}
}

// TestOrderRefuses: what deterministic order does not take yet is
// refused, naming the op or field.
func TestOrderRefuses(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Ops = append([]Op{{Shuffle: &ShuffleOp{Buffer: 10}}}, s.Ops...) }, "ops[0].shuffle: not yet under order: deterministic"},
		{func(s *Spec) {
			s.Ops = append([]Op{{Filter: &FilterOp{Fn: "drop_every", Args: map[string]any{"n": 2}}}}, s.Ops...)
		}, "ops[0].filter"},
		{func(s *Spec) { s.Ops = append(s.Ops, Op{Batch: &BatchOp{Size: 2}}) }, "one batching op"},
		{func(s *Spec) { s.Order = "random" }, `order: "random"`},
		{func(s *Spec) { s.OrderBlock, s.OrderWindow = 1<<20, 2 }, "order_window"},
		{func(s *Spec) { s.OrderConsumers = -1 }, "order_consumers: -1"},
		{func(s *Spec) { s.OrderConsumer, s.OrderConsumers = 3, 3 }, "order_consumer: 3: want 0 to order_consumers-1 (2)"},
		{func(s *Spec) { s.OrderConsumer = 1 }, "order_consumer: 1: want 0 to order_consumers-1 (0)"},
		{func(s *Spec) {
			s.Source = Source{Files: &FilesSource{Paths: []string{"/nonexistent/*.txt"}, Format: "lines"}}
		}, "reads range and synthetic sources so far"},
	} {
		s := orderSpec(100, 10, false)
		tc.edit(s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v", tc.want, err)
		}
	}
}
