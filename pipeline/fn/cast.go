package fn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/feedmesh/feedmesh/pipeline/formats"
	"github.com/feedmesh/feedmesh/tensor"
)

// cast converts a numeric or bool tensor to another numeric or bool dtype
// (see tensor.Cast for the conversion rules).
func cast(a Args) (MapFn, error) {
	var name string
	var dt tensor.DType
	err := func() error {
		if err := a.Known("tensor", "dtype"); err != nil {
			return err
		}
		var err error
		if _, ok := a["tensor"]; !ok {
			return fmt.Errorf("tensor: required")
		}
		if name, err = stringArg(a, "tensor", ""); err != nil {
			return err
		}
		if _, ok := a["dtype"]; !ok {
			return fmt.Errorf("dtype: required")
		}
		s, err := a.String("dtype", "")
		if err != nil {
			return err
		}
		if dt, err = tensor.ParseDType(s); err != nil {
			return fmt.Errorf("dtype: %w", err)
		}
		if dt == tensor.Bytes {
			return fmt.Errorf("dtype: cannot cast to bytes")
		}
		return nil
	}()
	if err != nil {
		return nil, argError("cast", err)
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, name)
		if err != nil {
			return e, err
		}
		if t.DType == dt {
			return e, nil
		}
		out, err := tensor.Cast(*t, dt)
		if err != nil {
			return e, fmt.Errorf("cast: %w", err)
		}
		return with(e, out), nil
	}, nil
}

// jsonField extracts a field (a dotted path such as "meta.lang" for nested
// objects) from a bytes scalar holding a JSON object, and stores it as a
// tensor converted like the jsonl reader's fields (formats.JSONTensor).
func jsonField(a Args) (MapFn, error) {
	var in, out string
	var path []string
	var dt tensor.DType
	err := func() error {
		if err := a.Known("tensor", "field", "output", "dtype"); err != nil {
			return err
		}
		var err error
		if in, err = stringArg(a, "tensor", "json"); err != nil {
			return err
		}
		if _, ok := a["field"]; !ok {
			return fmt.Errorf("field: required")
		}
		field, err := stringArg(a, "field", "")
		if err != nil {
			return err
		}
		path = strings.Split(field, ".")
		for _, p := range path {
			if p == "" {
				return fmt.Errorf("field: %q has an empty path segment", field)
			}
		}
		if out, err = stringArg(a, "output", path[len(path)-1]); err != nil {
			return err
		}
		s, err := a.String("dtype", "bytes")
		if err != nil {
			return err
		}
		if dt, err = tensor.ParseDType(s); err != nil {
			return fmt.Errorf("dtype: %w", err)
		}
		return nil
	}()
	if err != nil {
		return nil, argError("json_field", err)
	}
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, in)
		if err != nil {
			return e, err
		}
		raw, err := bytesScalar(t)
		if err != nil {
			return e, err
		}
		for i, key := range path {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
				where := fmt.Sprintf("tensor %q", in)
				if i > 0 {
					where = strings.Join(path[:i], ".")
				}
				if json.Valid(raw) {
					return e, fmt.Errorf("json_field: %s: not an object", where)
				}
				return e, fmt.Errorf("json_field: %s: invalid JSON: %w", where, err)
			}
			v, ok := obj[key]
			if !ok {
				return e, fmt.Errorf("json_field: field %q missing", strings.Join(path[:i+1], "."))
			}
			raw = bytes.TrimSpace(v)
		}
		o, err := formats.JSONTensor(out, raw, dt)
		if err != nil {
			return e, fmt.Errorf("json_field: field %q: %w", strings.Join(path, "."), err)
		}
		return with(e, o), nil
	}, nil
}
