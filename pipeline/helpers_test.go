package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Test functions, registered under names no built-in uses.
func init() {
	// test_double: value → 2*value.
	fn.RegisterMap("test_double", func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		v := value(e)
		return tensor.Element{Tensors: []tensor.Tensor{tensor.ScalarInt64("value", 2*v)}}, nil
	})
	// test_vec: adds "tokens" int32 [value % 5] filled with value.
	fn.RegisterMap("test_vec", func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		v := value(e)
		toks := make([]int32, v%5)
		for i := range toks {
			toks[i] = int32(v)
		}
		t, err := tensor.FromInt32s("tokens", nil, toks)
		if err != nil {
			return e, err
		}
		e.Set(t)
		return e, nil
	})
	// test_rand: adds "r" = a draw from the element's generator.
	fn.RegisterMap("test_rand", func(c *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		e.Set(tensor.ScalarInt64("r", c.Rand().Int64()))
		return e, nil
	})
	// test_jitter: sleeps a pseudo-random few microseconds so parallel
	// workers finish out of order.
	fn.RegisterMap("test_jitter", func(c *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		time.Sleep(time.Duration(c.Rand().IntN(200)) * time.Microsecond)
		return e, nil
	})
	fn.RegisterMap("test_fail_at_7", func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		if value(e) == 7 {
			return e, errors.New("seven")
		}
		return e, nil
	})
	fn.RegisterMapFactory("test_fail_at", func(a fn.Args) (fn.MapFn, error) {
		n, err := a.Int("n", 0)
		if err != nil {
			return nil, err
		}
		return func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
			if value(e) == n {
				return e, fmt.Errorf("failed at %d", n)
			}
			return e, nil
		}, nil
	})
	fn.RegisterFilter("test_even", func(_ *fn.FnContext, e tensor.Element) (bool, error) {
		return value(e)%2 == 0, nil
	})
	fn.RegisterMapFactory("test_add", func(a fn.Args) (fn.MapFn, error) {
		if err := a.Known("n"); err != nil {
			return nil, err
		}
		n, err := a.Int("n", 0)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("n: must be >= 0")
		}
		return func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
			return tensor.Element{Tensors: []tensor.Tensor{tensor.ScalarInt64("value", value(e)+n)}}, nil
		}, nil
	})
}

func value(e tensor.Element) int64 {
	t, ok := e.Get("value")
	if !ok {
		return -1
	}
	v, _ := t.Int64Value()
	return v
}

// run opens spec over all its splits and returns everything it yields.
func run(t testing.TB, spec *Spec) []tensor.Element {
	t.Helper()
	out, err := runErr(spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(spec *Spec) ([]tensor.Element, error) {
	ctx := context.Background()
	splits, err := Splits(spec)
	if err != nil {
		return nil, err
	}
	it, err := Open(ctx, spec, splits)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []tensor.Element
	for {
		e, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// values flattens the "value" tensors of elements or batches.
func values(t testing.TB, els []tensor.Element) []int64 {
	t.Helper()
	var out []int64
	for _, e := range els {
		v, ok := e.Get("value")
		if !ok {
			t.Fatalf("element without value: %+v", e)
		}
		xs, err := v.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, xs...)
	}
	return out
}

func seq(a, b int64) []int64 {
	var out []int64
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

func rng(n, splitSize int64) *Spec {
	return &Spec{Source: Source{Range: &RangeSource{Stop: n, SplitSize: splitSize}}}
}
