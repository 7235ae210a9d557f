package jobtest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// DumpValues reads a --dump file of a range dataset: each line's "value".
func DumpValues(t testing.TB, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line map[string]int64
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		v, ok := line["value"]
		if !ok || len(line) != 1 {
			t.Fatalf("%s: line %q, want {\"value\": N}", path, sc.Text())
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}
