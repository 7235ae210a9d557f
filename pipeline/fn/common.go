package fn

import (
	"fmt"
	"strings"

	"github.com/feedmesh/feedmesh/tensor"
)

// input returns the element's tensor called name, or an error listing the
// tensors it does have.
func input(e tensor.Element, name string) (*tensor.Tensor, error) {
	if t, ok := e.Get(name); ok {
		return t, nil
	}
	names := make([]string, len(e.Tensors))
	for i := range e.Tensors {
		names[i] = e.Tensors[i].Name
	}
	return nil, fmt.Errorf("tensor %q not found (element has: %s)", name, strings.Join(names, ", "))
}

// with returns e with t set (replacing the tensor of the same name or
// appending it). It copies the tensor list, so the caller's element is not
// modified in place.
func with(e tensor.Element, t tensor.Tensor) tensor.Element {
	out := tensor.Element{Tensors: make([]tensor.Tensor, len(e.Tensors), len(e.Tensors)+1)}
	copy(out.Tensors, e.Tensors)
	out.Set(t)
	return out
}

// bytesScalar checks that t is a bytes scalar and returns its value.
func bytesScalar(t *tensor.Tensor) ([]byte, error) {
	if t.DType != tensor.Bytes || t.NumValues() != 1 || len(t.Offsets) != 2 {
		return nil, fmt.Errorf("tensor %q: want a bytes scalar, have %s%v", t.Name, t.DType, t.Shape)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t.Entry(0), nil
}

// stringArg reads a string arg that must not be empty.
func stringArg(a Args, key, def string) (string, error) {
	s, err := a.String(key, def)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", fmt.Errorf("%s: must not be empty", key)
	}
	return s, nil
}

// positiveInt reads an int arg that must be in [1, max]; def 0 means the
// arg is required.
func positiveInt(a Args, key string, def, max int64) (int64, error) {
	if _, ok := a[key]; !ok && def == 0 {
		return 0, fmt.Errorf("%s: required", key)
	}
	v, err := a.Int(key, def)
	if err != nil {
		return 0, err
	}
	if v < 1 || v > max {
		return 0, fmt.Errorf("%s: must be in [1, %d], got %d", key, max, v)
	}
	return v, nil
}
