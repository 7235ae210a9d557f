package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// `tune` on its cheapest pipeline gives one row per variant, the rewrite
// with its prediction, every ratio against the sweep's best.
func TestTuneRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines for a few seconds")
	}
	out, errOut, code := runCmd(t, "tune", "--pipelines", "prefetch_starved", "--seconds", "0.3", "--warmup", "0.1", "--json")
	if code != 0 {
		t.Fatalf("tune exited %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var variants []string
	for _, r := range rows {
		variants = append(variants, r["variant"].(string))
		if r["pipeline"] != "prefetch_starved" || !(r["elements_per_second"].(float64) > 0) || !(r["ratio_vs_best_sweep"].(float64) > 0) {
			t.Errorf("row %v", r)
		}
		if r["variant"] == "rewritten" && !(r["predicted_elements_per_second"].(float64) > 0) {
			t.Errorf("the rewritten row has no prediction: %v", r)
		}
		if r["variant"] == "best_sweep" && r["ratio_vs_best_sweep"].(float64) != 1 {
			t.Errorf("best_sweep's ratio to itself: %v", r)
		}
	}
	if want := []string{"as_written", "rewritten", "autotune", "hill_climb", "best_sweep"}; !reflect.DeepEqual(variants, want) {
		t.Errorf("variants %v, want %v", variants, want)
	}
	if _, errOut, code := runCmd(t, "tune", "--pipelines", "nope"); code != 2 || !strings.Contains(errOut, `unknown pipeline "nope"`) {
		t.Errorf("unknown pipeline: %d %q", code, errOut)
	}
}

func TestAllocations(t *testing.T) {
	if got := allocations(map[int]int{0: 1, 2: 1}, 4); len(got) != 6 { // (1,1) (1,2) (1,3) (2,1) (2,2) (3,1)
		t.Errorf("%d allocations of 4 cores to 2 maps, want 6: %v", len(got), got)
	}
	if got := allocations(map[int]int{}, 8); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("no map: %v", got)
	}
}
