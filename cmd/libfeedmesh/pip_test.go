package main

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/version"
	"github.com/feedmesh/feedmesh/testcluster"
)

// pipTools checks, in the interpreter's own words, for what the install
// needs besides venv: setuptools >= 61 (pyproject.toml's [project]),
// wheel (bdist_wheel) and numpy (the package's dependency, from Debian's
// python3-numpy through --system-site-packages, as no package index is
// reachable). It prints one line per module missing: the module, a tab,
// its Debian package.
const pipTools = `
try:
    import setuptools
    if int(setuptools.__version__.split(".")[0]) < 61:
        print("setuptools >= 61 (this is %s)\tpython3-setuptools" % setuptools.__version__)
except ImportError:
    print("setuptools\tpython3-setuptools")
for m in ("wheel", "numpy"):
    try:
        __import__(m)
    except ImportError:
        print(m + "\tpython3-" + m)
`

// pipRead runs in a virtual environment's python: feedmesh must be the
// one installed there, of version want, with its metadata, and read a job
// of the cluster at addr end to end.
const pipRead = `
import sys
import importlib.metadata as md
import feedmesh

addr, want, venv, job = sys.argv[1:5]
errors = []
def check(ok, what):
    if not ok:
        errors.append(what)
check(feedmesh.__version__ == want, "feedmesh.__version__ is %r, feedmesh version says %r" % (feedmesh.__version__, want))
check(feedmesh.__file__.startswith(venv + "/"), "feedmesh was imported from %s, not from the environment %s" % (feedmesh.__file__, venv))
check(feedmesh.library_path().startswith(venv + "/"), "the library is %s, not the environment's" % feedmesh.library_path())
check(md.version("feedmesh") == want, "the installed metadata says version %s" % md.version("feedmesh"))
check("numpy" in (md.requires("feedmesh") or []), "the metadata requires %s, not numpy" % md.requires("feedmesh"))
check(feedmesh.library_version() == want, "the library says version %s" % feedmesh.library_version())
spec = {"source": {"range": {"stop": 1000, "split_size": 100}}, "ops": [{"batch": {"size": 50}}]}
with feedmesh.Client(addr, transport="fast", log_level="error") as c:
    with c.distribute(spec, job=job) as it:
        got = sorted(v for b in it for v in b["value"].tolist())
check(got == list(range(1000)), "the job read %d elements, not 0..999 once each" % len(got))
if errors:
    sys.exit("\n".join(errors))
print("feedmesh %s from %s read %d elements" % (feedmesh.__version__, feedmesh.__file__, len(got)))
`

// TestPipInstall installs the Python package as docs/python/install.md
// says: pip builds the library into a fresh virtual environment
// (python3 -m venv --system-site-packages, for Debian's numpy), whose
// python reads a job from a cluster; pip wheel makes a platform wheel,
// which installs into a second environment with no Go on PATH, where the
// same read works. Offline: --no-index, and --no-build-isolation (the
// build uses the interpreter's setuptools and wheel).
//
// The two library builds are the time it takes: the first compiles what
// Go's build cache lacks (about a minute cold on 2 cores; TestPython's
// build, with the same -trimpath, fills it), the second is a link.
func TestPipInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the library twice with pip")
	}
	requireCgo(t)
	py := findPython(t)
	tmp := t.TempDir()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	// The environment of every pip and python run: this test's Go first
	// on PATH (setup.py runs go), nothing of the checkout on PYTHONPATH,
	// pip offline and quiet, its cache in tmp.
	env := withoutEnv(os.Environ(), "PYTHONPATH", "PYTHONHOME", "FEEDMESH_LIB", "PATH")
	env = append(env, "PATH="+filepath.Dir(goTool())+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_CACHE_DIR="+filepath.Join(tmp, "pip-cache"),
		"PYTHONDONTWRITEBYTECODE=1")
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = repo, env
		began := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		t.Logf("%s %s (%v)", filepath.Base(name), strings.Join(args, " "), time.Since(began).Round(10*time.Millisecond))
		return string(out)
	}

	out, err := exec.Command(py, "-c", pipTools).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, out)
	}
	if missing := strings.TrimSpace(string(out)); missing != "" {
		var mods, pkgs []string
		for _, line := range strings.Split(missing, "\n") {
			mod, pkg, _ := strings.Cut(line, "\t")
			mods, pkgs = append(mods, mod), append(pkgs, pkg)
		}
		skipOrFail(t, "%s lacks what pip needs to build feedmesh offline: %s (for Debian's /usr/bin/python3: apt-get install %s)",
			py, strings.Join(mods, ", "), strings.Join(pkgs, " "))
	}
	newVenv := func(dir string) string {
		t.Helper()
		cmd := exec.Command(py, "-m", "venv", "--system-site-packages", dir)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			skipOrFail(t, "%s -m venv: %v (apt-get install python3-venv)\n%s", py, err, out)
		}
		return filepath.Join(dir, "bin", "python")
	}

	c := testcluster.Start(t, 1)
	addr := c.Node(0).Addr()

	// 1. pip install from the checkout, into a new environment.
	venv1 := filepath.Join(tmp, "venv1")
	py1 := newVenv(venv1)
	began := time.Now()
	run(env, filepath.Join(venv1, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "./python")
	installTime := time.Since(began)
	// From a directory that is not python/, which would shadow the
	// environment's feedmesh with the checkout's.
	read := func(env []string, py, venv, job string) {
		t.Helper()
		cmd := exec.Command(py, "-c", pipRead, addr, version.Version, venv, job)
		cmd.Dir, cmd.Env = tmp, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", py, err, out)
		}
		t.Logf("%s: %s", py, strings.TrimSpace(string(out)))
	}
	read(env, py1, venv1, "pip-install")

	// 2. pip wheel: one platform wheel, the library inside the package.
	dist := filepath.Join(tmp, "dist")
	began = time.Now()
	run(env, filepath.Join(venv1, "bin", "pip"), "wheel", "--no-build-isolation", "--no-index", "--no-deps", "-w", dist, "./python")
	wheelTime := time.Since(began)
	platOut, err := exec.Command(py, "-c", "import sysconfig; print(sysconfig.get_platform().replace('-', '_').replace('.', '_'))").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantWheel := fmt.Sprintf("feedmesh-%s-py3-none-%s.whl", version.Version, strings.TrimSpace(string(platOut)))
	wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
	if len(wheels) != 1 || filepath.Base(wheels[0]) != wantWheel {
		t.Fatalf("pip wheel made %v, want one %s", wheels, wantWheel)
	}
	checkWheel(t, wheels[0])

	// 3. The wheel into a second environment, with no Go to be found.
	var noGo []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir != "" && !fileExists(filepath.Join(dir, "go")) {
			noGo = append(noGo, dir)
		}
	}
	env2 := append(withoutEnv(env, "PATH", "GOROOT", "GO"), "PATH="+strings.Join(noGo, string(os.PathListSeparator)))
	venv2 := filepath.Join(tmp, "venv2")
	py2 := newVenv(venv2)
	which := exec.Command(py2, "-c", "import shutil, sys; sys.exit(shutil.which('go') or 0)")
	which.Env = env2
	if out, err := which.CombinedOutput(); err != nil {
		t.Fatalf("go is still on the PATH of the second environment: %s", out)
	}
	run(env2, filepath.Join(venv2, "bin", "pip"), "install", "--no-index", wheels[0])
	read(env2, py2, venv2, "pip-wheel")

	// 4. The first-Client check in an environment whose numpy is gone:
	// it names the environment's python and its pip.
	poison := filepath.Join(tmp, "no-numpy", "numpy")
	if err := os.MkdirAll(poison, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(poison, "__init__.py"), []byte("raise ImportError('numpy hidden by the test')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py2, "-c", "import feedmesh\ntry:\n    feedmesh.Client('127.0.0.1:1')\nexcept feedmesh.Error as e:\n    print(e)\n")
	cmd.Dir, cmd.Env = tmp, append(env2, "PYTHONPATH="+filepath.Dir(poison))
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "feedmesh needs numpy, which "+py2+" (Python ") ||
		!strings.Contains(string(out), py2+" -m pip install numpy") {
		t.Fatalf("a Client without numpy in %s said (%v):\n%s", venv2, err, out)
	}
	t.Logf("without numpy: %s", strings.TrimSpace(string(out)))

	t.Logf("pip install (library build included) %v, pip wheel %v, wheel %s; the test %v",
		installTime.Round(100*time.Millisecond), wheelTime.Round(100*time.Millisecond), wheelSize(wheels[0]), time.Since(start).Round(100*time.Millisecond))
}

// checkWheel checks the wheel's contents: the package with its library
// and _version.py, no C header, metadata naming the dependencies.
func checkWheel(t *testing.T, path string) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	var metadata string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if strings.HasSuffix(f.Name, ".dist-info/METADATA") {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			metadata = string(b)
		}
	}
	for _, want := range []string{"feedmesh/__init__.py", "feedmesh/libfeedmesh.so", "feedmesh/_version.py", "feedmesh/torch.py"} {
		if !slices.Contains(names, want) {
			t.Errorf("the wheel lacks %s: %v", want, names)
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".h") || strings.Contains(n, "tests/") {
			t.Errorf("the wheel carries %s", n)
		}
	}
	for _, want := range []string{"Name: feedmesh\n", "Version: " + version.Version + "\n", "Requires-Python: >=3.7\n",
		"Requires-Dist: numpy\n", "Provides-Extra: torch\n", "Requires-Dist: torch ; extra == 'torch'\n"} {
		if !strings.Contains(metadata, want) {
			t.Errorf("the wheel's METADATA lacks %q:\n%s", want, metadata)
		}
	}
}

func wheelSize(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f MB", float64(fi.Size())/1e6)
}
