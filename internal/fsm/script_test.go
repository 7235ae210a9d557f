package fsm_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm/fsmtest"
)

// TestScripts runs the datadriven scripts in testdata/*.txt: each is a
// run of the protocol against one replica (fsmtest's commands), with the
// answer and the state expected after each command. go test -rewrite
// writes the answers anew; read them before committing them.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			e := fsmtest.New()
			datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string { return e.Handle(t, d) })
		})
	}
}
