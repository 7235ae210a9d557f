"""The messages of a first Client that this interpreter cannot make:
numpy missing, the library missing or built for another platform. They
must name the interpreter (sys.executable) and say how to get what is
missing for it.

Run by cmd/libfeedmesh's TestPythonMessages (go test ./cmd/libfeedmesh);
they need neither numpy, nor the library, nor a cluster: every case runs
in a child interpreter (this one's, sys.executable) whose feedmesh lacks
what the case takes away.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
PACKAGE = os.path.join(PYTHON_DIR, "feedmesh")
REPO = os.path.dirname(PYTHON_DIR)

sys.path.insert(0, PYTHON_DIR)
from feedmesh import _checks  # noqa: E402  (standard library only)

LINUX = sys.platform.startswith("linux")


def first_client(env_extra, pythonpath=PYTHON_DIR, drop=("FEEDMESH_LIB",)):
    """Runs `feedmesh.Client(...)` in a child of this interpreter and
    returns the feedmesh.Error's text it printed."""
    env = {k: v for k, v in os.environ.items() if k not in drop and k != "PYTHONPATH"}
    env.update(env_extra)
    env["PYTHONPATH"] = pythonpath
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    code = ("import feedmesh\n"
            "try:\n"
            "    feedmesh.Client('127.0.0.1:1', dial_timeout=1)\n"
            "except feedmesh.Error as e:\n"
            "    print(e)\n"
            "else:\n"
            "    print('NO ERROR')\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=60, universal_newlines=True)
    return out.stdout.strip()


def elf_header(machine, bits=64):
    """The first 64 bytes of a little-endian ELF shared object for the
    e_machine number machine."""
    h = bytearray(64)
    h[0:4] = b"\x7fELF"
    h[4] = 2 if bits == 64 else 1
    h[5] = 1  # little-endian
    h[6] = 1  # version
    h[16:18] = (3).to_bytes(2, "little")  # ET_DYN
    h[18:20] = machine.to_bytes(2, "little")
    return bytes(h)


def copy_package(dest):
    """Copies the package's Python files (no library) to dest/feedmesh."""
    os.makedirs(os.path.join(dest, "feedmesh"))
    for name in os.listdir(PACKAGE):
        if name.endswith(".py") and name != "_version.py":
            shutil.copy(os.path.join(PACKAGE, name), os.path.join(dest, "feedmesh", name))


class NumpyHintTest(unittest.TestCase):
    """How to install numpy, by interpreter."""

    def interp(self, **kw):
        d = {"executable": "/usr/bin/python3", "version": "3.11.2", "venv": False, "system_site": False,
             "debian": False, "conda": False}
        d.update(kw)
        return d

    def test_debian_python_gets_apt(self):
        h = _checks.numpy_hint(self.interp(debian=True))
        self.assertIn("apt-get install python3-numpy", h)
        self.assertNotIn("-m pip install", h)

    def test_pyenv_python_gets_pip_not_apt(self):
        exe = "/home/u/.pyenv/versions/3.12.1/bin/python3"
        h = _checks.numpy_hint(self.interp(executable=exe, version="3.12.1"))
        self.assertEqual(h, exe + " -m pip install numpy")
        self.assertNotIn("apt", h)
        msg = _checks.numpy_missing(ImportError("No module named 'numpy'"), interp=self.interp(executable=exe, version="3.12.1"))
        self.assertIn(exe + " (Python 3.12.1) cannot import (No module named 'numpy')", msg)
        self.assertNotIn("apt", msg)

    def test_venv_gets_its_pip(self):
        exe = "/srv/venvs/train/bin/python"
        h = _checks.numpy_hint(self.interp(executable=exe, venv=True))
        self.assertEqual(h, exe + " -m pip install numpy")

    def test_venv_of_debian_python(self):
        exe = "/srv/venvs/train/bin/python"
        h = _checks.numpy_hint(self.interp(executable=exe, venv=True, debian=True, system_site=True))
        self.assertIn("apt-get install python3-numpy", h)
        self.assertIn(exe + " -m pip install numpy", h)
        h = _checks.numpy_hint(self.interp(executable=exe, venv=True, debian=True, system_site=False))
        self.assertTrue(h.startswith(exe + " -m pip install numpy"), h)
        self.assertIn("--system-site-packages", h)

    def test_conda(self):
        h = _checks.numpy_hint(self.interp(executable="/opt/conda/bin/python", conda=True))
        self.assertIn("conda install numpy", h)
        self.assertNotIn("apt", h)


class NumpyMissingTest(unittest.TestCase):
    """A first Client in an interpreter whose numpy does not import."""

    def test_message_names_interpreter_and_install(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "numpy"))
            with open(os.path.join(tmp, "numpy", "__init__.py"), "w") as f:
                f.write("raise ImportError('numpy hidden by the test')\n")
            missing = os.path.join(tmp, "nowhere", "libfeedmesh.so")
            msg = first_client({"FEEDMESH_LIB": missing}, pythonpath=tmp + os.pathsep + PYTHON_DIR)
        self.assertTrue(msg.startswith("feedmesh needs numpy, which %s (Python " % sys.executable), msg)
        self.assertIn("numpy hidden by the test", msg)
        if _checks.interpreter()["debian"] and not _checks.interpreter()["venv"]:
            self.assertIn("apt-get install python3-numpy", msg)
        else:
            self.assertIn(sys.executable + " -m pip install numpy", msg)
        # The library is missing too: said in the same message.
        self.assertIn("And the Go library is not at " + missing, msg)


class LibraryMissingTest(unittest.TestCase):
    def test_feedmesh_lib_names_nothing(self):
        missing = "/nonexistent/libfeedmesh.so"
        msg = first_client({"FEEDMESH_LIB": missing})
        self.assertIn("the Go library is not at " + missing, msg)
        self.assertIn(sys.executable, msg)
        self.assertIn("FEEDMESH_LIB=" + missing, msg)

    def test_checkout_without_library(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "go.mod"), "w") as f:
                f.write("module github.com/feedmesh/feedmesh\n\ngo 1.26.0\n")
            os.makedirs(os.path.join(tmp, "internal", "version"))
            with open(os.path.join(tmp, "internal", "version", "VERSION"), "w") as f:
                f.write("9.8.7\n")
            copy_package(os.path.join(tmp, "python"))
            other = "libfeedmesh.dylib" if sys.platform != "darwin" else "libfeedmesh.so"
            open(os.path.join(tmp, "python", "feedmesh", other), "w").close()
            msg = first_client({}, pythonpath=os.path.join(tmp, "python"))
            out = subprocess.run([sys.executable, "-c", "import feedmesh; print(feedmesh.__version__)"],
                                 env=dict(os.environ, PYTHONPATH=os.path.join(tmp, "python")),
                                 stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        self.assertEqual(out.strip(), "9.8.7")  # a checkout's version is its internal/version/VERSION
        lib = os.path.join(tmp, "python", "feedmesh", _checks.library_name())
        self.assertIn("the Go library is not at %s (%s, next to it, is for another platform)" % (lib, other), msg)
        self.assertIn(sys.executable, msg)
        self.assertIn("This feedmesh is the checkout at " + tmp, msg)
        self.assertIn("cd %s && go build -buildmode=c-shared" % tmp, msg)
        self.assertIn("pip install --no-build-isolation " + os.path.join(tmp, "python"), msg)

    def test_installed_without_library(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = os.path.join(tmp, "site-packages")
            copy_package(site)
            msg = first_client({}, pythonpath=site)
        self.assertIn("the Go library is not at " + os.path.join(site, "feedmesh", _checks.library_name()), msg)
        self.assertIn("This feedmesh (%s) was installed without a library for " % os.path.join(site, "feedmesh"), msg)
        self.assertIn(sys.executable + " -m pip install --no-build-isolation --force-reinstall CHECKOUT/python", msg)


@unittest.skipUnless(LINUX, "the foreign-library cases are written for a Linux host")
class LibraryForeignTest(unittest.TestCase):
    def with_library(self, data):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "libfeedmesh.so")
            with open(path, "wb") as f:
                f.write(data)
            return path, first_client({"FEEDMESH_LIB": path})

    def host_machine(self):
        plat, machine, bits = _checks.host()
        m = _checks._HOST_ELF.get((machine, bits))
        if m is None:
            self.skipTest("this host's machine (%s, %d-bit) is not in the check's table" % (machine, bits))
        return m, bits

    def test_other_architecture(self):
        m, bits = self.host_machine()
        other, name = (183, "aarch64") if m != 183 else (62, "x86_64")
        path, msg = self.with_library(elf_header(other))
        self.assertIn("the Go library %s is built for Linux (ELF) %s 64-bit" % (path, name), msg)
        self.assertIn("%s (Python " % sys.executable, msg)
        self.assertIn("runs on " + _checks.host_text(), msg)
        self.assertIn("FEEDMESH_LIB=" + path, msg)

    def test_other_word_size(self):
        m, bits = self.host_machine()
        path, msg = self.with_library(elf_header(m, bits=32 if bits == 64 else 64))
        self.assertIn("is built for Linux (ELF)", msg)
        self.assertIn("%d-bit, and %s" % (32 if bits == 64 else 64, sys.executable), msg)

    def test_other_os(self):
        macho = b"\xcf\xfa\xed\xfe" + (0x0100000C).to_bytes(4, "little") + bytes(56)
        path, msg = self.with_library(macho)
        self.assertIn("is built for macOS (Mach-O) arm64 64-bit", msg)

    def test_damaged(self):
        if importlib.util.find_spec("numpy") is None:  # the numpy check comes first
            if os.environ.get("FEEDMESH_REQUIRE_PYTHON") == "1":
                self.fail("%s has no numpy (FEEDMESH_REQUIRE_PYTHON=1)" % sys.executable)
            self.skipTest("%s has no numpy: a Client loads the library only once numpy imports" % sys.executable)
        m, bits = self.host_machine()
        path, msg = self.with_library(elf_header(m, bits))  # the header alone
        self.assertIn("feedmesh: cannot load the Go library %s into %s (Python " % (path, sys.executable), msg)
        self.assertIn("FEEDMESH_LIB=" + path, msg)


class VersionTest(unittest.TestCase):
    def test_checkout_version(self):
        with open(os.path.join(REPO, "internal", "version", "VERSION")) as f:
            want = f.read().strip()
        out = subprocess.run([sys.executable, "-c", "import feedmesh; print(feedmesh.__version__)"],
                             env=dict(os.environ, PYTHONPATH=PYTHON_DIR), stdout=subprocess.PIPE,
                             universal_newlines=True, check=True).stdout
        self.assertEqual(out.strip(), want)


if __name__ == "__main__":
    unittest.main()
