package fsmtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/ranges"
)

// scriptError is a mistake in the script itself (a missing or malformed
// argument), which fails the test instead of being printed as the
// command's answer.
type scriptError struct{ error }

func badArg(format string, args ...any) error { return scriptError{fmt.Errorf(format, args...)} }

// values are an argument's values: key=v, key=(v1, v2) and key=v1,v2
// alike; nil when the argument is absent.
func values(d *datadriven.TestData, key string) []string {
	arg, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range arg.Vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// Str is the argument's value, def when absent.
func Str(d *datadriven.TestData, key, def string) string {
	if vs := values(d, key); len(vs) > 0 {
		return vs[0]
	}
	return def
}

// MustStr is the argument's value, required.
func MustStr(d *datadriven.TestData, key string) (string, error) {
	if !d.HasArg(key) {
		return "", badArg("missing %s=", key)
	}
	return Str(d, key, ""), nil
}

// Int is the argument as an integer, def when absent.
func Int(d *datadriven.TestData, key string, def int64) (int64, error) {
	s := Str(d, key, "")
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, badArg("%s=%s: %v", key, s, err)
	}
	return n, nil
}

// Float is the argument as a number, def when absent.
func Float(d *datadriven.TestData, key string, def float64) (float64, error) {
	s := Str(d, key, "")
	if s == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, badArg("%s=%s: %v", key, s, err)
	}
	return f, nil
}

// Duration is the argument as a duration (30s, 100ms), def when absent.
func Duration(d *datadriven.TestData, key string, def time.Duration) (time.Duration, error) {
	s := Str(d, key, "")
	if s == "" {
		return def, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, badArg("%s=%s: %v", key, s, err)
	}
	return v, nil
}

// List is the argument's values (key=a,b or key=(a, b)).
func List(d *datadriven.TestData, key string) []string { return values(d, key) }

// Ints is the argument's values as integers.
func Ints(d *datadriven.TestData, key string) ([]int64, error) {
	var out []int64
	for _, s := range values(d, key) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, badArg("%s: %q: %v", key, s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Flag reports whether the bare argument (key, with no value) or key=true
// is there.
func Flag(d *datadriven.TestData, key string) bool {
	arg, ok := d.Arg(key)
	return ok && (len(arg.Vals) == 0 || arg.Vals[0] == "true")
}

// splitElems parses "split:lo-hi" items: the elements [lo, hi) of a
// split (several ranges of one split join).
func splitElems(d *datadriven.TestData, key string) (ids []int64, elems map[int64]ranges.Set, err error) {
	elems = map[int64]ranges.Set{}
	for _, item := range values(d, key) {
		id, span, ok := strings.Cut(item, ":")
		lo, hi, ok2 := strings.Cut(span, "-")
		s, err1 := strconv.ParseInt(id, 10, 64)
		l, err2 := strconv.ParseInt(lo, 10, 64)
		h, err3 := strconv.ParseInt(hi, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil {
			return nil, nil, badArg("%s: %q is not split:lo-hi", key, item)
		}
		if _, seen := elems[s]; !seen {
			ids = append(ids, s)
		}
		set := elems[s]
		set.AddAll(ranges.Span(l, h))
		elems[s] = set
	}
	return ids, elems, nil
}
