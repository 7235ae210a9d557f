package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// binDir holds the feedmesh binary the tests build (feedmeshBinary); it
// is removed when they end.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "feedmesh-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

var built struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// feedmeshBinary builds cmd/feedmesh once per test run (with the race
// detector when the tests run under it) and returns its path: the node
// processes are the product binary, started as a user starts it.
func feedmeshBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		path := filepath.Join(binDir, "feedmesh")
		args := []string{"build", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/feedmesh/feedmesh/cmd/feedmesh")
		built.out, built.err = exec.Command("go", args...).CombinedOutput()
		built.path = path
	})
	if built.err != nil {
		t.Fatalf("go build ./cmd/feedmesh: %v\n%s", built.err, built.out)
	}
	return built.path
}
