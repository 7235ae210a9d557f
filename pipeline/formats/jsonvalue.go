package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/feedmesh/feedmesh/tensor"
)

// JSONTensor converts one JSON value to a tensor named name:
//   - dtype bytes (or 0): a string gives its contents, an array of strings a
//     bytes vector, any other value its JSON text (a bytes scalar);
//   - bool: true/false, or an array of them;
//   - numeric dtypes: a number (scalar) or an array of numbers (1-D).
//     Integer dtypes need integral values within their range.
//
// null is an error.
func JSONTensor(name string, raw []byte, dt tensor.DType) (tensor.Tensor, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return tensor.Tensor{}, errors.New("empty value")
	}
	if bytes.Equal(raw, []byte("null")) {
		return tensor.Tensor{}, errors.New("is null")
	}
	if dt == 0 {
		dt = tensor.Bytes
	}
	if !dt.Valid() {
		return tensor.Tensor{}, fmt.Errorf("invalid dtype %d", uint8(dt))
	}
	if raw[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return tensor.Tensor{}, err
		}
		if dt == tensor.Bytes {
			entries := make([][]byte, len(items))
			for i, it := range items {
				var s string
				if err := json.Unmarshal(it, &s); err != nil {
					// Mixed arrays keep the whole array as JSON text.
					return tensor.BytesScalar(name, append([]byte(nil), raw...)), nil
				}
				entries[i] = []byte(s)
			}
			return tensor.BytesVector(name, entries), nil
		}
		t := tensor.Tensor{Name: name, DType: dt, Shape: []int64{int64(len(items))}, Data: make([]byte, len(items)*dt.Size())}
		for i, it := range items {
			if err := putJSONScalar(t.Data, dt, i, bytes.TrimSpace(it)); err != nil {
				return tensor.Tensor{}, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return t, nil
	}
	if dt == tensor.Bytes {
		if raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return tensor.Tensor{}, err
			}
			return tensor.BytesScalar(name, []byte(s)), nil
		}
		if !json.Valid(raw) {
			return tensor.Tensor{}, errors.New("invalid JSON value")
		}
		return tensor.BytesScalar(name, append([]byte(nil), raw...)), nil
	}
	t := tensor.Tensor{Name: name, DType: dt, Data: make([]byte, dt.Size())}
	if err := putJSONScalar(t.Data, dt, 0, raw); err != nil {
		return tensor.Tensor{}, err
	}
	return t, nil
}

// putJSONScalar parses a JSON number or bool into value i of dst.
func putJSONScalar(dst []byte, dt tensor.DType, i int, raw []byte) error {
	s := string(raw)
	if dt == tensor.Bool {
		switch s {
		case "true":
			dst[i] = 1
			return nil
		case "false":
			dst[i] = 0
			return nil
		}
		return fmt.Errorf("want true or false, got %s", abbrev(s))
	}
	if len(s) == 0 || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) || !json.Valid(raw) {
		return fmt.Errorf("want a number for %s, got %s", dt, abbrev(s))
	}
	return PutParsed(dst, dt, i, s)
}

// PutParsed parses the decimal text s as a value of dtype dt and stores it
// as value i of dst (little-endian). Integer dtypes need integral values in
// range; bool accepts what strconv.ParseBool accepts. It is shared by the
// CSV and JSON readers and the json_field function.
func PutParsed(dst []byte, dt tensor.DType, i int, s string) error {
	switch dt {
	case tensor.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("cannot parse %s as bool", abbrev(s))
		}
		dst[i] = 0
		if b {
			dst[i] = 1
		}
		return nil
	case tensor.Uint8, tensor.Int8, tensor.Int32, tensor.Int64:
		bits := map[tensor.DType]int{tensor.Uint8: 8, tensor.Int8: 8, tensor.Int32: 32, tensor.Int64: 64}[dt]
		var v int64
		var err error
		if dt == tensor.Uint8 {
			var u uint64
			u, err = strconv.ParseUint(s, 10, bits)
			v = int64(u)
		} else {
			v, err = strconv.ParseInt(s, 10, bits)
		}
		if err != nil {
			return fmt.Errorf("cannot parse %s as %s", abbrev(s), dt)
		}
		tensor.PutInt64(dst, dt, i, v)
		return nil
	case tensor.Float16, tensor.BFloat16, tensor.Float32, tensor.Float64:
		bits := 64
		if dt != tensor.Float64 {
			bits = 32
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil && !(errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0)) {
			return fmt.Errorf("cannot parse %s as %s", abbrev(s), dt)
		}
		tensor.PutFloat64(dst, dt, i, f)
		return nil
	}
	return fmt.Errorf("cannot parse into %s", dt)
}

func abbrev(s string) string {
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}
