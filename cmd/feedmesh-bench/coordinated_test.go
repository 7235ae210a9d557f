package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestBenchCoordinatedFlags(t *testing.T) {
	if _, errOut, code := runCmd(t, "coordinated", "--consumers", "0"); code == 0 || !strings.Contains(errOut, "--consumers") {
		t.Errorf("coordinated --consumers 0: exit %d, %q", code, errOut)
	}
}

func TestBenchCoordinatedJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	out, errOut, code := runCmd(t, "coordinated", "--lines", "3000", "--consumers", "2", "--nodes", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		for _, f := range []string{"consumers", "coordinated", "modelled_seconds", "speedup", "padding_fraction"} {
			if _, ok := r[f]; !ok {
				t.Fatalf("row %v lacks %s", r, f)
			}
		}
	}
	if rows[0]["tokens"] != rows[1]["tokens"] {
		t.Fatalf("runs read different tokens: %v vs %v", rows[0]["tokens"], rows[1]["tokens"])
	}
}
