package fn

import (
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
)

func TestCostArgs(t *testing.T) {
	f, _ := LookupMap("cost")
	for _, c := range []struct {
		args Args
		want string
	}{
		{Args{}, "exactly one"},
		{Args{"cpu_us": 1, "sleep_us": 1}, "exactly one"},
		{Args{"cpu_us": -1}, "exactly one"},
		{Args{"sleep_us": MaxCostMicros + 1}, "at most"},
		{Args{"cpu": 5}, "cpu"},
		{Args{"sleep_us": 1, "out_bytes": -1}, "out_bytes -1"},
		{Args{"sleep_us": 1, "out_bytes": MaxCostOutBytes + 1}, "out_bytes"},
	} {
		if _, err := f(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cost(%v) = %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

// TestCostSpendsItsTime checks the lower bound only: a loaded machine can
// make the call slower, never faster.
func TestCostSpendsItsTime(t *testing.T) {
	in := elem(tensor.BytesScalar("text", []byte("x")))
	for _, args := range []Args{{"cpu_us": 2000}, {"sleep_us": 2000}} {
		f := mustMap(t, "cost", args)
		start := time.Now()
		out, err := f(&FnContext{}, in)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 2*time.Millisecond {
			t.Errorf("cost(%v) took %v, want >= 2ms", args, d)
		}
		if len(out.Tensors) != 1 || out.Tensors[0].Name != "text" {
			t.Errorf("cost(%v) changed the element: %+v", args, out)
		}
	}
}

// out_bytes sets a payload of that size, the same for every element, and
// leaves the element given untouched.
func TestCostOutBytes(t *testing.T) {
	f := mustMap(t, "cost", Args{"sleep_us": 1, "out_bytes": 4096})
	in := elem(tensor.BytesScalar("text", []byte("x")))
	a, err := f(&FnContext{}, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f(&FnContext{}, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []tensor.Element{a, b} {
		p, ok := out.Get("payload")
		if len(out.Tensors) != 2 || !ok || p.DType != tensor.Uint8 || len(p.Data) != 4096 || p.Shape[0] != 4096 {
			t.Fatalf("out_bytes 4096 gave %d tensors, payload %v", len(out.Tensors), ok)
		}
	}
	pa, _ := a.Get("payload")
	pb, _ := b.Get("payload")
	if string(pa.Data) != string(pb.Data) || &pa.Data[0] == &pb.Data[0] {
		t.Fatal("payloads differ, or share their bytes")
	}
	if len(in.Tensors) != 1 {
		t.Fatalf("the input element changed: %d tensors", len(in.Tensors))
	}
}
