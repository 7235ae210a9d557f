package fn

import (
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/tensor"
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
