package main

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/internal/version"
)

// TestVersionCommand: `feedmesh version` prints internal/version's
// version, the one the Python package's feedmesh.__version__ is.
func TestVersionCommand(t *testing.T) {
	out, errOut, code := runCmd(t, "version")
	if code != 0 {
		t.Fatalf("version exited %d: %s", code, errOut)
	}
	if want := "feedmesh " + version.Version + " ("; !strings.HasPrefix(out, want) {
		t.Fatalf("version printed %q, want it to start with %q", out, want)
	}
}
