package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/testcluster"
)

// The Python suite (python/tests) runs under /usr/bin/python3, the
// interpreter Debian's python3-numpy and python3-torch install into, or
// $FEEDMESH_PYTHON. Without it, numpy, or a C compiler for cgo, the test
// skips and says what to install; with FEEDMESH_REQUIRE_PYTHON=1 (CI) it
// fails instead.
const installHint = "apt-get install python3-numpy python3-torch"

// skippedSummary is unittest's last line when tests were skipped, "OK
// (skipped=N)" or "FAILED (failures=1, skipped=N)".
var skippedSummary = regexp.MustCompile(`^(?:OK|FAILED) \(.*skipped=(\d+)\)`)

func requirePython() bool { return os.Getenv("FEEDMESH_REQUIRE_PYTHON") == "1" }

// skipOrFail skips the test, or fails it where Python is required.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if requirePython() {
		t.Fatalf(format+" (FEEDMESH_REQUIRE_PYTHON=1)", args...)
	}
	t.Skipf(format, args...)
}

func pythonPath() string {
	if p := os.Getenv("FEEDMESH_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// requireCgo skips (or fails, under CI) when cgo is off: the library
// needs a C compiler.
func requireCgo(t *testing.T) {
	t.Helper()
	out, err := exec.Command(goTool(), "env", "CGO_ENABLED").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	if strings.TrimSpace(string(out)) != "1" {
		skipOrFail(t, "cgo is off (no C compiler?): the library needs it (apt-get install gcc)")
	}
}

// findPython returns the interpreter the Python tests run under, or skips
// (fails, under CI) saying what to install.
func findPython(t *testing.T) string {
	t.Helper()
	py := pythonPath()
	if !fileExists(py) {
		if _, err := exec.LookPath(py); err != nil {
			skipOrFail(t, "no Python at %s (set FEEDMESH_PYTHON, or apt-get install python3 python3-numpy python3-torch)", py)
		}
	}
	return py
}

// buildLibrary builds this package as a C shared library into dir,
// with -trimpath as python/setup.py does, so that Go's build cache serves
// both (TestPipInstall's builds are then links). With
// FEEDMESH_CGOCHECK2=1 it is built with GOEXPERIMENT=cgocheck2, which
// checks every store of a Go pointer into C memory (the pinned batch
// buffers) at run time.
func buildLibrary(t *testing.T, dir string) string {
	t.Helper()
	requireCgo(t)
	lib := filepath.Join(dir, "libfeedmesh.so")
	cmd := exec.Command(goTool(), "build", "-buildmode=c-shared", "-trimpath", "-o", lib, ".")
	cmd.Env = os.Environ()
	if os.Getenv("FEEDMESH_CGOCHECK2") == "1" {
		cmd.Env = append(cmd.Env, "GOEXPERIMENT=cgocheck2")
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the library: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", lib, time.Since(start).Round(time.Millisecond))
	return lib
}

// TestPython builds the library, starts a 3-node cluster and runs the
// Python package's unittest suite against it.
func TestPython(t *testing.T) {
	if raceEnabled {
		// Not skipOrFail: this is no missing package. A library built
		// with -race fails to start ThreadSanitizer when Python loads it
		// ("failed to allocate"); the Go side's concurrency is raced in
		// TestIteratorObject instead.
		t.Skip("the Python suite runs without -race: ThreadSanitizer cannot start in a library loaded by Python")
	}
	py := findPython(t)
	if out, err := exec.Command(py, "-c", "import numpy").CombinedOutput(); err != nil {
		skipOrFail(t, "%s cannot import numpy: %s\n%s", py, installHint, out)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	lib := buildLibrary(t, t.TempDir())
	c := testcluster.Start(t, 3)

	stress := "10000"
	if testing.Short() {
		stress = "2000"
	}
	args := []string{"-m", "unittest", "-v"}
	if run := os.Getenv("FEEDMESH_PYTHON_TESTS"); run != "" {
		args = append(args, strings.Fields(run)...) // e.g. test_feedmesh.TorchTest
	} else {
		args = append(args, "test_feedmesh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = filepath.Join(repo, "python", "tests")
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+filepath.Join(repo, "python"),
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
		"FEEDMESH_LIB="+lib,
		"FEEDMESH_TEST_ADDR="+c.Node(0).Addr(),
		"FEEDMESH_STRESS_BATCHES="+stress,
		// cgo's default pointer checks, whatever the environment says.
		"GODEBUG=cgocheck=1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("python %s (%v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || ctx.Err() != nil {
			t.Fatalf("the Python suite failed: %v (ctx: %v)", err, ctx.Err())
		}
		t.Fatal(err)
	}
	if requirePython() {
		// JAX is optional (no Debian package): its example's test skips
		// where it is missing, saying so, even under CI. unittest's
		// summary ("OK (skipped=N)") must count those skips only.
		jaxSkips := 0
		for _, line := range strings.Split(out.String(), "\n") {
			if m := skippedSummary.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				if n, _ := strconv.Atoi(m[1]); n != jaxSkips {
					t.Fatalf("the Python suite skipped %d tests under FEEDMESH_REQUIRE_PYTHON=1, %d of them for JAX: %s", n, jaxSkips, line)
				}
				continue
			}
			if !strings.Contains(line, "skipped") {
				continue
			}
			if !strings.Contains(line, "JAX is not installed") {
				t.Fatalf("the Python suite skipped tests under FEEDMESH_REQUIRE_PYTHON=1: %s", line)
			}
			jaxSkips++
		}
	}
}

// TestPythonMessages runs python/tests/test_install.py: what a first
// Client says when its interpreter lacks numpy, or a library built for its
// platform. It needs no library, numpy or cluster: each case runs a child
// interpreter that lacks what the case takes away.
func TestPythonMessages(t *testing.T) {
	py := findPython(t)
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_install")
	cmd.Dir = filepath.Join(repo, "python", "tests")
	cmd.Env = append(withoutEnv(os.Environ(), "PYTHONPATH", "FEEDMESH_LIB"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("python -m unittest -v test_install:\n%s", out)
	if err != nil {
		t.Fatalf("the install checks' tests failed: %v", err)
	}
	if bytes.Contains(out, []byte("skipped")) && requirePython() {
		t.Fatalf("the install checks' tests skipped tests under FEEDMESH_REQUIRE_PYTHON=1")
	}
}

// withoutEnv returns env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}
