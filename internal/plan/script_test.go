package plan

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs the datadriven scripts in testdata/*.txt: the
// leader's planners against gossip's members, the Raft configuration and
// the replicated jobs (built with fsmtest's commands), with the decisions
// expected after each command. go test -rewrite writes them anew; read
// them before committing them.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			e := newScriptEnv()
			datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string { return e.handle(t, d) })
		})
	}
}
