package pipeline

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/tensor"
)

func TestMemoryBudgetAccounting(t *testing.T) {
	b := NewMemoryBudget(100, "--task-memory-budget")
	a, c := b.account("ops[0].shuffle"), b.account("ops[1].batch")
	if err := a.charge(60); err != nil {
		t.Fatal(err)
	}
	if err := c.charge(40); err != nil {
		t.Fatalf("charging up to the limit: %v", err)
	}
	err := c.charge(1)
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("over the limit: %v, want a *BudgetError", err)
	}
	if be.Op != "ops[1].batch" || be.Held != 41 || be.Total != 101 || be.Limit != 100 {
		t.Fatalf("error %+v", be)
	}
	want := "ops[1].batch: holds 41 B (the task's ops 101 B), over the task's memory budget of 100 B (--task-memory-budget)"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	c.credit(1000) // more than it holds: only what it holds
	if b.Used() != 60 {
		t.Fatalf("used %d after crediting the batch, want 60", b.Used())
	}
	a.release()
	if b.Used() != 0 || b.Peak() != 101 {
		t.Fatalf("used %d peak %d, want 0 and 101", b.Used(), b.Peak())
	}
	// Zero and negative amounts change nothing.
	if err := a.charge(0); err != nil || b.Used() != 0 {
		t.Fatal("a zero charge counted")
	}
	a.credit(-5)
	if b.Used() != 0 {
		t.Fatal("a negative credit counted")
	}
}

func TestMemoryBudgetNil(t *testing.T) {
	if NewMemoryBudget(0, "") != nil || NewMemoryBudget(-1, "") != nil {
		t.Fatal("a budget of no bytes is not nil (none)")
	}
	var b *MemoryBudget
	a := b.account("ops[0].shuffle")
	if a != nil {
		t.Fatal("a nil budget gave an account")
	}
	if err := a.charge(1 << 62); err != nil {
		t.Fatal(err)
	}
	a.credit(1)
	a.release()
	if b.Used() != 0 || b.Limit() != 0 || b.Peak() != 0 {
		t.Fatal("a nil budget counts")
	}
}

func TestMemoryBudgetConcurrent(t *testing.T) {
	b := NewMemoryBudget(1<<40, "")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		a := b.account("op")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if err := a.charge(3); err != nil {
					t.Error(err)
					return
				}
				a.credit(2)
			}
			a.release()
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Fatalf("used %d after every account released", b.Used())
	}
	if b.Peak() < 1000 {
		t.Fatalf("peak %d, want at least 1000", b.Peak())
	}
}

// Large budgets count in grains: the shared count moves once per grain
// of traffic, stays within two grains per op of what the ops hold, and
// comes back to zero.
func TestMemoryBudgetGrains(t *testing.T) {
	b := NewMemoryBudget(1<<30, "")
	a := b.account("op")
	for i := 0; i < 10000; i++ {
		if err := a.charge(1000); err != nil {
			t.Fatal(err)
		}
		if u, h := b.Used(), a.held; u < h || u > h+2<<20 {
			t.Fatalf("held %d, counted %d", h, u)
		}
		if i%2 == 1 {
			a.credit(1500)
		}
	}
	for a.held > 0 {
		a.credit(999)
		if u, h := b.Used(), a.held; u < h || u > h+2<<20 {
			t.Fatalf("held %d, counted %d", h, u)
		}
	}
	if b.Used() != 0 {
		t.Fatalf("counted %d when the op holds nothing", b.Used())
	}
	if err := a.charge(1<<30 + 1); err == nil {
		t.Fatal("a charge over the limit passed")
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB",
		1 << 30: "1 GiB", 1288490189: "1.2 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestElementBytes(t *testing.T) {
	e := tensor.Element{Tensors: []tensor.Tensor{
		tensor.BytesScalar("record", make([]byte, 1000)),
		tensor.ScalarInt64("id", 1),
	}}
	n := ElementBytes(&e)
	if n < 1008 || n > 1100 {
		t.Fatalf("ElementBytes = %d, want about 1008", n)
	}
}

// records is a synthetic source of count records of size bytes each.
func records(count int64, size int) *Spec {
	return NewSpec(FromSynthetic(SyntheticSource{Kind: "records", Count: count, RecordBytes: size, SplitSize: 64}))
}

// runBudget runs spec to its end under a budget of limit bytes and
// returns the error it ended with (nil: io.EOF) and the budget.
func runBudget(t *testing.T, spec *Spec, limit int64) (int, error, *MemoryBudget) {
	t.Helper()
	return runBudgetAfter(t, spec, limit, nil)
}

// runBudgetAfter is runBudget calling before, if not nil, once the
// pipeline is open and before it is read.
func runBudgetAfter(t *testing.T, spec *Spec, limit int64, before func(*MemoryBudget)) (int, error, *MemoryBudget) {
	t.Helper()
	b := NewMemoryBudget(limit, "--task-memory-budget")
	ss, err := Splits(spec)
	if err != nil {
		t.Fatal(err)
	}
	it, err := OpenWithOptions(context.Background(), spec, ss, Options{Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if before != nil {
		before(b)
	}
	n := 0
	for {
		_, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return n, nil, b
		}
		if err != nil {
			return n, err, b
		}
		n++
	}
}

// registerBudgetDoc registers test_budget_doc once (go test -count N).
var registerBudgetDoc sync.Once

// Each buffering op fails the pipeline once what it holds goes over the
// budget, naming itself; under a budget that fits, the same spec runs to
// its end and everything charged is credited back.
func TestMemoryBudgetOps(t *testing.T) {
	registerBudgetDoc.Do(func() {
		fn.RegisterMapFactory("test_budget_doc", func(a fn.Args) (fn.MapFn, error) {
			return func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
				toks := make([]int32, 1000) // 16 KB of packed row each
				t, err := tensor.FromInt32s("tokens", nil, toks)
				if err != nil {
					return e, err
				}
				return tensor.Element{Tensors: []tensor.Tensor{t}}, nil
			}, nil
		})
	})
	const kb = 1 << 10
	cases := []struct {
		name   string
		spec   *Spec
		op     string
		fits   int64 // a budget the spec runs under
		over   int64 // a budget it goes over
		yields int   // elements it yields when it fits
		ahead  bool  // the op fills its buffer on a goroutine of its own, ahead of the reader
	}{
		{"shuffle", records(400, 10*kb).Shuffle(100, 1), "ops[0].shuffle", 1200 * kb, 500 * kb, 400, false},
		{"batch", records(400, 10*kb).Batch(100, false), "ops[0].batch", 1200 * kb, 500 * kb, 4, false},
		{"padded_batch", records(400, 10*kb).PaddedBatch(100, 0), "ops[0].padded_batch", 1200 * kb, 500 * kb, 4, false},
		{"prefetch", records(400, 10*kb).Prefetch(100), "ops[0].prefetch", 1200 * kb, 50 * kb, 400, true},
		{"bucket", NewSpec(FromRange(0, 400, 1)).Then(Op{Map: &MapOp{Fn: "test_budget_doc"}}).
			BucketBySequenceLength(BucketOp{Tensor: "tokens", Boundaries: []int64{10}, BatchSizes: []int64{100, 100}}),
			"ops[1].bucket_by_sequence_length", 600 * kb, 300 * kb, 4, false},
		{"pack", NewSpec(FromRange(0, 400, 1)).Then(Op{Map: &MapOp{Fn: "test_budget_doc"}}).
			Pack(PackOp{Tensor: "tokens", Length: 64000, Strategy: PackConcat}),
			"ops[1].pack", 1200 * kb, 500 * kb, 7, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err, b := runBudget(t, c.spec, c.fits)
			if err != nil {
				t.Fatalf("under %d bytes: %v", c.fits, err)
			}
			if n != c.yields {
				t.Fatalf("yielded %d, want %d", n, c.yields)
			}
			if b.Used() != 0 {
				t.Fatalf("%d bytes still counted after the end", b.Used())
			}
			if b.Peak() == 0 {
				t.Fatal("nothing was counted")
			}
			var before func(*MemoryBudget)
			if c.ahead {
				// A reader as fast as the op's goroutine (seen under -race)
				// keeps its buffer under the budget: read only once it has
				// gone over, or after 10 s (then the check below fails).
				before = func(b *MemoryBudget) {
					for deadline := time.Now().Add(10 * time.Second); b.Peak() <= c.over && time.Now().Before(deadline); {
						runtime.Gosched()
					}
				}
			}
			_, err, _ = runBudgetAfter(t, c.spec, c.over, before)
			var be *BudgetError
			if !errors.As(err, &be) {
				t.Fatalf("under %d bytes: %v, want a *BudgetError", c.over, err)
			}
			if be.Op != c.op || !strings.HasPrefix(err.Error(), c.op+": holds ") || be.Held <= 0 || be.Total <= c.over {
				t.Fatalf("error %q (%+v), want one naming %s", err, be, c.op)
			}
		})
	}
}

// A shuffle under a repeat is reopened each pass: what the closed one
// held is credited, so passes do not add up.
func TestMemoryBudgetRepeatCredits(t *testing.T) {
	spec := records(200, 10<<10).Shuffle(100, 1).Repeat(5)
	n, err, b := runBudget(t, spec, 1200<<10)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000 || b.Used() != 0 {
		t.Fatalf("yielded %d, used %d after the end; want 1000 and 0", n, b.Used())
	}
}

// max_record_bytes is bounded: a spec cannot make a node read one record
// of more than 1 GiB into memory.
func TestMaxRecordBytesBounded(t *testing.T) {
	for _, n := range []int64{1 << 30, formats.MaxMaxRecordBytes + 1, 1 << 40, -1} {
		s := NewSpec(FromFiles("lines", "testdata/*.txt"))
		s.Source.Files.MaxRecordBytes = n
		err := s.Validate()
		if ok := n >= 0 && n <= formats.MaxMaxRecordBytes; ok != (err == nil) {
			t.Errorf("max_record_bytes %d: %v", n, err)
		}
		if err != nil && !strings.Contains(err.Error(), "max_record_bytes") {
			t.Errorf("max_record_bytes %d: the error does not name the field: %v", n, err)
		}
	}
}
