"""Builds the feedmesh package: python/feedmesh plus libfeedmesh, the Go
client (cmd/libfeedmesh) compiled as a C shared library into the package.

The metadata is in pyproject.toml; the version is the Go tree's
(internal/version/VERSION, the one `feedmesh version` prints). The build
step runs, in the checkout this directory belongs to:

    go build -buildmode=c-shared -trimpath -ldflags "-s -w" -o libfeedmesh.so ./cmd/libfeedmesh

(Go >= 1.26 on PATH or at $GO, and a C compiler for cgo), copies the
library into the package and writes feedmesh/_version.py. The wheel is
tagged py3-none-<platform>: the library is loaded with ctypes, so it
serves any Python 3 of that platform, and no other platform. Everything
is built in a temporary directory, nothing in the checkout, so concurrent
builds do not meet and no stale build/ leaks into a wheel; Go's build
cache makes a second build a link (seconds).

Commands (docs/python/install.md):

    python3 -m venv --system-site-packages VENV
    VENV/bin/pip install --no-build-isolation ./python
    VENV/bin/pip wheel --no-build-isolation --no-deps -w dist ./python
"""

import atexit
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULE = "github.com/feedmesh/feedmesh"


def _checks():
    """feedmesh/_checks.py, loaded alone (the package imports ctypes' users)."""
    spec = importlib.util.spec_from_file_location("_feedmesh_checks", os.path.join(HERE, "feedmesh", "_checks.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def go_root():
    """The checkout's root (the Go module), or exit saying why there is none."""
    try:
        with open(os.path.join(ROOT, "go.mod")) as f:
            if f.readline().split() == ["module", MODULE]:
                return ROOT
    except OSError:
        pass
    sys.exit(
        "feedmesh: %s is not the python/ directory of a feedmesh checkout (no go.mod of %s in %s): the package's "
        "library is built from the Go sources around it. Build from a checkout (pip install ./python, pip wheel "
        "./python); a source distribution is not supported." % (HERE, MODULE, ROOT)
    )


def version():
    with open(os.path.join(go_root(), "internal", "version", "VERSION")) as f:
        return f.read().strip()


def go_command():
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        sys.exit(
            "feedmesh: building the package needs Go >= 1.26 (https://go.dev/dl/), on PATH or at $GO, and a C "
            "compiler (cgo; Debian: apt-get install gcc), to compile the Go client as a C shared library. "
            "A wheel built elsewhere (pip wheel --no-build-isolation --no-deps ./python on a machine of this "
            "platform) installs without them."
        )
    return go


def build_library(dest):
    """Builds libfeedmesh into the file dest; returns its size."""
    go = go_command()
    name = os.path.basename(dest)
    tmp = tempfile.mkdtemp(prefix="feedmesh-go-")
    try:
        out = os.path.join(tmp, name)  # go also writes a C header next to it: not packaged
        cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/libfeedmesh"]
        env = dict(os.environ, CGO_ENABLED="1")  # a missing C compiler is then named by go
        print("feedmesh: %s (in %s)" % (" ".join(shlex.quote(a) for a in cmd), go_root()), flush=True)
        start = time.monotonic()
        try:
            subprocess.run(cmd, cwd=go_root(), env=env, check=True)
        except subprocess.CalledProcessError as e:
            sys.exit(
                "feedmesh: building the library failed (go build exited with status %d, output above). It needs "
                "Go >= 1.26 and a C compiler for cgo (Debian: apt-get install gcc)." % e.returncode
            )
        checks = _checks()
        kind = checks.binary_kind(out)
        if kind is None or checks.foreign(kind):
            sys.exit(
                "feedmesh: go built %s for %s, not for this interpreter's platform (%s): unset GOOS/GOARCH, or "
                "build with a Python of the platform the library is for." % (
                    out, kind and checks._kind_text(kind), checks.host_text())
            )
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(out, dest)
        size = os.path.getsize(dest)
        print("feedmesh: built %s (%.1f MB) in %.1f s" % (name, size / 1e6, time.monotonic() - start), flush=True)
        return size
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BuildPy(build_py):
    """build_py, plus the library and _version.py."""

    def run(self):
        super().run()
        name = _checks().library_name()
        if getattr(self, "editable_mode", False):
            # pip install -e: the package runs from the checkout, which
            # reads its version from the Go tree; the library goes where
            # the go build of docs/python/install.md puts it.
            build_library(os.path.join(HERE, "feedmesh", name))
            return
        pkg = os.path.join(self.build_lib, "feedmesh")
        build_library(os.path.join(pkg, name))
        with open(os.path.join(pkg, "_version.py"), "w") as f:
            f.write("# Written by python/setup.py from internal/version/VERSION.\n__version__ = %r\n" % version())


class BinaryDistribution(Distribution):
    """The package carries a platform's library: a platform wheel, installed
    into platlib."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPy}
try:
    try:  # setuptools >= 70.1 has its own
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        """Tags the wheel py3-none-<platform>: ctypes loads the library, so
        any Python 3 ABI will do, on this platform only."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = BdistWheel
except ImportError:  # building metadata only; bdist_wheel needs the wheel package (Debian: python3-wheel)
    pass

# Build in a temporary directory, not python/build and python/*.egg-info.
_tmp = tempfile.mkdtemp(prefix="feedmesh-build-")
atexit.register(shutil.rmtree, _tmp, True)

setup(
    version=version(),
    distclass=BinaryDistribution,
    cmdclass=cmdclass,
    options={"build": {"build_base": os.path.join(_tmp, "build")}, "egg_info": {"egg_base": _tmp}},
)
