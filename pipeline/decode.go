package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// MaxSpecBytes bounds the size of a spec file or document accepted by
// ParseYAML, ParseJSON and LoadFile.
const MaxSpecBytes = 4 << 20

// ParseYAML decodes a YAML spec and validates it. Unknown keys are errors
// naming their path (`ops[1].shuffle: unknown field "bufer" (known: buffer, seed)`).
func ParseYAML(data []byte) (*Spec, error) {
	s, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseJSON decodes a JSON spec and validates it; see ParseYAML.
func ParseJSON(data []byte) (*Spec, error) {
	s, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadFile reads a spec file (JSON when the name ends in .json or the text
// starts with '{', YAML otherwise), resolves relative source paths against
// the file's directory, and validates it.
func LoadFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load spec %s: %w", path, err)
	}
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("load spec %s: larger than %d bytes", path, MaxSpecBytes)
	}
	var s *Spec
	if strings.HasSuffix(strings.ToLower(path), ".json") || bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		s, err = decodeJSON(data)
	} else {
		s, err = decodeYAML(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.ResolvePaths(filepath.Dir(path))
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ResolvePaths makes the files source's relative globs, and the relative
// `tokenizer` paths of the tokenizing map functions, relative to dir.
func (s *Spec) ResolvePaths(dir string) {
	if s.Source.Files != nil {
		for i, p := range s.Source.Files.Paths {
			if p != "" && !filepath.IsAbs(p) && !objstore.IsRemote(p) {
				s.Source.Files.Paths[i] = filepath.Join(dir, p)
			}
		}
	}
	for _, op := range s.Ops {
		if op.Map == nil || !fn.TakesTokenizerFile(op.Map.Fn) {
			continue
		}
		if p, ok := op.Map.Args["tokenizer"].(string); ok && p != "" && !filepath.IsAbs(p) && !objstore.IsRemote(p) {
			op.Map.Args["tokenizer"] = filepath.Join(dir, p)
		}
	}
}

func decodeYAML(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("spec larger than %d bytes", MaxSpecBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty spec")
		}
		// yaml.v3's errors already say "yaml: ".
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("invalid YAML: want one document, found more")
	}
	return decodeGeneric(v)
}

func decodeJSON(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("spec larger than %d bytes", MaxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty spec")
		}
		return nil, fmt.Errorf("json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("json: unexpected data after the spec object")
	}
	return decodeGeneric(v)
}

// decodeGeneric fills a Spec from the generic tree a YAML or JSON decoder
// produced, rejecting unknown keys and wrong types with the key's path.
// Both formats go through it, so they cannot drift apart.
func decodeGeneric(v any) (*Spec, error) {
	if v == nil {
		return nil, fmt.Errorf("empty spec")
	}
	var s Spec
	if err := decodeValue("", v, reflect.ValueOf(&s).Elem()); err != nil {
		return nil, err
	}
	return &s, nil
}

var argsType = reflect.TypeOf(fn.Args(nil))

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func errPath(path string) string {
	if path == "" {
		return "spec"
	}
	return path
}

// decodeValue fills rv from v, the generic tree's value at path.
func decodeValue(path string, v any, rv reflect.Value) error {
	if rv.Type() == argsType {
		return decodeArgs(path, v, rv)
	}
	switch rv.Kind() {
	case reflect.Pointer:
		return decodePointer(path, v, rv)
	case reflect.Struct:
		return decodeStruct(path, v, rv)
	case reflect.Slice:
		return decodeSlice(path, v, rv)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: want a string, got %s", errPath(path), describe(v))
		}
		rv.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%s: want true or false, got %s", errPath(path), describe(v))
		}
		rv.SetBool(b)
		return nil
	case reflect.Int, reflect.Int64, reflect.Int32:
		return decodeInt(path, v, rv)
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		n, err := genericUint(v)
		if err != nil {
			return fmt.Errorf("%s: %w", errPath(path), err)
		}
		if rv.OverflowUint(n) {
			return fmt.Errorf("%s: %d is out of range", errPath(path), n)
		}
		rv.SetUint(n)
		return nil
	case reflect.Float64:
		f, err := genericFloat(v)
		if err != nil {
			return fmt.Errorf("%s: %w", errPath(path), err)
		}
		rv.SetFloat(f)
		return nil
	}
	return fmt.Errorf("%s: cannot decode into %s", errPath(path), rv.Type())
}

// decodeArgs fills a function's args (fn.Args) from a mapping, in their
// canonical form (normalizeArg).
func decodeArgs(path string, v any, rv reflect.Value) error {
	if v == nil {
		return nil
	}
	a, err := normalizeArg(v, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	m, ok := a.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want a mapping of argument names to values, got %s", path, describe(v))
	}
	rv.Set(reflect.ValueOf(fn.Args(m)))
	return nil
}

// decodePointer points rv at a new value decoded from v; a null leaves it
// nil, unless it points to a struct.
func decodePointer(path string, v any, rv reflect.Value) error {
	if v == nil {
		if rv.Type().Elem().Kind() == reflect.Struct {
			// `shuffle:` with nothing after it: an op with all defaults.
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		return nil
	}
	p := reflect.New(rv.Type().Elem())
	if err := decodeValue(path, v, p.Elem()); err != nil {
		return err
	}
	rv.Set(p)
	return nil
}

// decodeSlice fills a slice from a list, each entry at path[i].
func decodeSlice(path string, v any, rv reflect.Value) error {
	if v == nil {
		return nil
	}
	xs, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%s: want a list, got %s", errPath(path), describe(v))
	}
	out := reflect.MakeSlice(rv.Type(), len(xs), len(xs))
	for i, x := range xs {
		if err := decodeValue(fmt.Sprintf("%s[%d]", path, i), x, out.Index(i)); err != nil {
			return err
		}
	}
	rv.Set(out)
	return nil
}

// decodeInt fills a signed integer; a map's parallelism also takes "auto"
// (ParallelismAuto), and only written so.
func decodeInt(path string, v any, rv reflect.Value) error {
	autoField := strings.HasSuffix(path, ".map.parallelism")
	if s, ok := v.(string); ok && s == "auto" && autoField {
		rv.SetInt(ParallelismAuto)
		return nil
	}
	n, err := genericInt(v)
	if err == nil && autoField && n == ParallelismAuto {
		return fmt.Errorf("%s: must be in [1, %d], or auto (write auto, not %d)", path, MaxParallelism, n)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", errPath(path), err)
	}
	if rv.OverflowInt(n) {
		return fmt.Errorf("%s: %d is out of range", errPath(path), n)
	}
	rv.SetInt(n)
	return nil
}

// shorthandCount is the set of ops where a bare number means {count: N}.
var shorthandCount = map[reflect.Type]bool{
	reflect.TypeOf(TakeOp{}):   true,
	reflect.TypeOf(SkipOp{}):   true,
	reflect.TypeOf(RepeatOp{}): true,
}

func decodeStruct(path string, v any, rv reflect.Value) error {
	t := rv.Type()
	if t == reflect.TypeOf(AutocacheOp{}) {
		if mode, ok := v.(string); ok {
			v = map[string]any{"mode": mode}
		}
	}
	if shorthandCount[t] {
		if _, err := genericInt(v); err == nil {
			v = map[string]any{"count": v}
		}
	}
	m, err := stringMap(v)
	if err != nil {
		return fmt.Errorf("%s: %w", errPath(path), err)
	}
	fields := map[string]int{}
	var known []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = i
		known = append(known, name)
	}
	sort.Strings(known)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, ok := fields[k]
		if !ok {
			what := "field"
			switch t {
			case reflect.TypeOf(Op{}):
				what = "op"
			case reflect.TypeOf(Source{}):
				what = "source"
			}
			return fmt.Errorf("%s: unknown %s %q (known: %s)", errPath(path), what, k, strings.Join(known, ", "))
		}
		if err := decodeValue(join(path, k), m[k], rv.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

func stringMap(v any) (map[string]any, error) {
	switch m := v.(type) {
	case map[string]any:
		return m, nil
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("key %v: want a string key", k)
			}
			out[ks] = x
		}
		return out, nil
	case nil:
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("want a mapping, got %s", describe(v))
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		return fmt.Sprintf("the string %q", x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	case bool:
		return fmt.Sprintf("%v", x)
	}
	return fmt.Sprintf("%v", v)
}

func genericInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large", x)
		}
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("want an integer, got %v", x)
		}
		return int64(x), nil
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("want an integer, got %s", x)
		}
		return genericInt(f)
	}
	return 0, fmt.Errorf("want an integer, got %s", describe(v))
}

func genericUint(v any) (uint64, error) {
	if x, ok := v.(uint64); ok {
		return x, nil
	}
	if x, ok := v.(json.Number); ok {
		if n, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return n, nil
		}
	}
	n, err := genericInt(v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("must be >= 0, got %d", n)
	}
	return uint64(n), nil
}

func genericFloat(v any) (float64, error) {
	switch x := v.(type) {
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case float64:
		return x, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("want a number, got %s", x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got %s", describe(v))
}
