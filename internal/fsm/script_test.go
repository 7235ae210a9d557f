package fsm_test

import (
	"flag"
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
//
// Each script runs twice: with its jobs created as written (CreateJob
// v1..v5, the legacy options), and as the nodes create them since
// CreateJob v6 (fsmtest.Env.Upgrade): the answers must be the same.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata (%v)", err)
	}
	for _, upgrade := range []bool{false, true} {
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".txt")
			if upgrade {
				name += "/v6"
			}
			t.Run(name, func(t *testing.T) {
				if f := flag.Lookup("rewrite"); upgrade && f != nil && f.Value.String() == "true" {
					t.Skip("-rewrite writes the answers of the scripts as written")
				}
				e := fsmtest.New()
				e.Upgrade = upgrade
				datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string { return e.Handle(t, d) })
			})
		}
	}
}
