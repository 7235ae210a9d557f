package fn

import "fmt"

// FloatList returns args[key] as a list of numbers, def when absent. A
// single number is accepted as a list of one.
func (a Args) FloatList(key string, def []float64) ([]float64, error) {
	v, ok := a[key]
	if !ok {
		return def, nil
	}
	switch xs := v.(type) {
	case []float64:
		return xs, nil
	case []int64:
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = float64(x)
		}
		return out, nil
	case []int:
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = float64(x)
		}
		return out, nil
	case []any:
		out := make([]float64, len(xs))
		for i, x := range xs {
			f, err := Args{"v": x}.Float("v", 0)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: want a number, got %T", key, i, x)
			}
			out[i] = f
		}
		return out, nil
	case int, int64, uint64, float64, float32:
		f, err := a.Float(key, 0)
		return []float64{f}, err
	}
	return nil, fmt.Errorf("%s: want a list of numbers, got %T", key, v)
}

// argError prefixes a factory's error with the function's name, so a spec
// error reads "tokenize_whitespace: vocab_size: must be > 0".
func argError(fn string, err error) error { return fmt.Errorf("%s: %w", fn, err) }
