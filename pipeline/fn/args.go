package fn

import (
	"fmt"
	"math"
)

// Args are a function's arguments from a spec (YAML, JSON or the Go
// builder). Numbers may arrive as int, int64, uint64 or float64 depending on
// the decoder; the accessors below accept all of them.
type Args map[string]any

// Int returns args[key] as an int, def when absent.
func (a Args) Int(key string, def int64) (int64, error) {
	v, ok := a[key]
	if !ok {
		return def, nil
	}
	return toInt(key, v)
}

// Float returns args[key] as a float64, def when absent.
func (a Args) Float(key string, def float64) (float64, error) {
	v, ok := a[key]
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	}
	return 0, fmt.Errorf("%s: want a number, got %T", key, v)
}

// String returns args[key] as a string, def when absent.
func (a Args) String(key string, def string) (string, error) {
	v, ok := a[key]
	if !ok {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: want a string, got %T", key, v)
	}
	return s, nil
}

// Bool returns args[key] as a bool, def when absent.
func (a Args) Bool(key string, def bool) (bool, error) {
	v, ok := a[key]
	if !ok {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s: want true or false, got %T", key, v)
	}
	return b, nil
}

// Known returns an error naming the first key not in allowed, so typos in
// specs are caught at validation.
func (a Args) Known(allowed ...string) error {
	for k := range a {
		found := false
		for _, al := range allowed {
			if k == al {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("unknown arg %q (known: %v)", k, allowed)
		}
	}
	return nil
}

func toInt(key string, v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%s: %d is too large", key, x)
		}
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("%s: want an integer, got %v", key, x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("%s: want an integer, got %T", key, v)
}
