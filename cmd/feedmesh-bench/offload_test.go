package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchOffloadAutoRepeat: the slow-link scenario's auto-repeat row
// runs after auto's and reads with auto's profile remembered (its
// decision says it started from it, or chose a cut from it); every row
// read something.
func TestBenchOffloadAutoRepeat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	out, errOut, code := runCmd(t, "offload", "--scenarios", "slow-link", "--configs", "auto,auto-repeat", "--seconds", "2", "--local-cpus", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) != 2 || rows[0]["config"] != "auto" || rows[1]["config"] != "auto-repeat" {
		t.Fatalf("rows: %v", rows)
	}
	for _, r := range rows {
		if v, _ := r["elements_per_second"].(float64); !(v > 0) {
			t.Errorf("%v read nothing", r)
		}
	}
	if d, _ := rows[1]["decision"].(string); !strings.Contains(d, "profile") {
		t.Errorf("auto-repeat decided without auto's profile: %q", d)
	}
	if _, errOut, code := runCmd(t, "offload", "--rate", "0"); code == 0 || !strings.Contains(errOut, "--rate") {
		t.Errorf("offload --rate 0: exit %d, %q", code, errOut)
	}
}
