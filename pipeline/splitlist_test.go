package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ListSplits agrees with Splits split by split, for the sources it computes
// on demand (range, synthetic, including a short last split and an empty
// range) and for those it enumerates (files).
func TestListSplitsAgreesWithSplits(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Repeat("a line\n", 100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specs := map[string]*Spec{
		"range":          NewSpec(Source{Range: &RangeSource{Start: 0, Stop: 1000, SplitSize: 64}}),
		"range-step":     NewSpec(Source{Range: &RangeSource{Start: 10, Stop: -7, Step: -3, SplitSize: 5}}),
		"range-one":      NewSpec(Source{Range: &RangeSource{Start: 0, Stop: 10, SplitSize: 100}}),
		"range-empty":    NewSpec(Source{Range: &RangeSource{Start: 5, Stop: 5, SplitSize: 4}}),
		"synthetic-text": NewSpec(Source{Synthetic: &SyntheticSource{Kind: "text", Count: 333, SplitSize: 50}}),
		"files":          NewSpec(Source{Files: &FilesSource{Paths: []string{filepath.Join(dir, "*.txt")}, Format: "lines"}}),
	}
	for name, spec := range specs {
		want, err := Splits(spec)
		if err != nil {
			t.Fatalf("%s: Splits: %v", name, err)
		}
		l, err := ListSplits(spec)
		if err != nil {
			t.Fatalf("%s: ListSplits: %v", name, err)
		}
		if l.Len() != int64(len(want)) {
			t.Fatalf("%s: Len %d, want %d", name, l.Len(), len(want))
		}
		for _, s := range want {
			if got, ok := l.ByID(s.ID); !ok || got != s {
				t.Errorf("%s: ByID(%d) = %+v, %v; want %+v", name, s.ID, got, ok, s)
			}
		}
		for _, id := range []int64{-1, int64(len(want))} {
			if _, ok := l.ByID(id); ok {
				t.Errorf("%s: ByID(%d) found a split", name, id)
			}
		}
		if got := l.All(); !slices.Equal(got, want) {
			t.Errorf("%s: All() = %v, want %v", name, got, want)
		}
	}
	if _, err := ListSplits(NewSpec(Source{Range: &RangeSource{Start: 0, Stop: 1 << 40, SplitSize: 1}})); err == nil {
		t.Error("a range of more splits than MaxIndexSplits was listed")
	}
}
