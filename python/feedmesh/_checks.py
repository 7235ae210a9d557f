"""What this interpreter lacks to make a first Client, said precisely.

A Client needs numpy and libfeedmesh (the Go client as a C shared library)
built for this platform. `import feedmesh` checks neither (it stays cheap:
the standard library only); the first Client does, and its error names the
interpreter (sys.executable), what is missing, and how to get it for this
interpreter: apt for Debian's own python3, pip in a virtual environment,
conda in a conda environment, pip for any other (pyenv, a python.org
build); a library to build from a checkout or install with pip.

Standard library only, and no import of the rest of the package: python/
setup.py loads this file on its own to check the library it built.
"""

import os
import sys

# Debian's (and Ubuntu's) interpreter and where its python3-* packages go.
DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"

MODULE = "github.com/feedmesh/feedmesh"

# The build command of a checkout (docs/python/install.md).
GO_BUILD = "go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o python/feedmesh/%s ./cmd/libfeedmesh"


def library_name(platform=None):
    """libfeedmesh's file name on platform (sys.platform)."""
    return "libfeedmesh.dylib" if (platform or sys.platform) == "darwin" else "libfeedmesh.so"


# --- the interpreter -------------------------------------------------------


def interpreter():
    """What the messages need to know of the running interpreter, as a dict
    (tests pass their own)."""
    prefix, base = sys.prefix, getattr(sys, "base_prefix", sys.prefix)
    venv = prefix != base
    system_site = False
    if venv:
        try:
            with open(os.path.join(prefix, "pyvenv.cfg")) as f:
                for line in f:
                    k, _, v = line.partition("=")
                    if k.strip() == "include-system-site-packages":
                        system_site = v.strip().lower() == "true"
        except OSError:
            pass
    return {
        "executable": sys.executable or "python3",
        "version": "%d.%d.%d" % sys.version_info[:3],
        "venv": venv,
        "system_site": system_site,
        # Debian's default python3 (the one python3-numpy is built for),
        # itself or as the base of this virtual environment.
        "debian": _is_debian_python(sys.executable),
        "conda": os.path.isdir(os.path.join(prefix, "conda-meta")),
    }


def _is_debian_python(exe):
    if not exe or not os.path.isdir(DEBIAN_DIST_PACKAGES) or not os.path.exists(DEBIAN_PYTHON):
        return False
    try:
        return os.path.realpath(exe) == os.path.realpath(DEBIAN_PYTHON)
    except OSError:
        return False


def describe(interp):
    return "%s (Python %s)" % (interp["executable"], interp["version"])


# --- numpy -----------------------------------------------------------------


def numpy_hint(interp):
    """How to install numpy for this interpreter: one or two commands."""
    exe = interp["executable"]
    pip = "%s -m pip install numpy" % exe
    if interp["venv"]:
        if interp["debian"] and interp["system_site"]:
            return ("this virtual environment sees Debian's packages (--system-site-packages): "
                    "apt-get install python3-numpy (as root), or %s" % pip)
        if interp["debian"]:
            return ("%s; with no package index, apt-get install python3-numpy (as root) and make the "
                    "environment again with python3 -m venv --system-site-packages, which sees Debian's packages" % pip)
        if interp["conda"]:
            return "conda install numpy (in this environment), or %s" % pip
        return pip
    if interp["debian"]:
        return ("apt-get install python3-numpy (as root: Debian's package for %s; pip refuses to install "
                "into it), or a virtual environment: python3 -m venv --system-site-packages VENV" % DEBIAN_PYTHON)
    if interp["conda"]:
        return "conda install numpy (in this environment), or %s" % pip
    return pip


def numpy_missing(exc, library=None, interp=None):
    """The message for a Client made where numpy does not import (exc),
    naming also a library problem (library: its path) if there is one."""
    interp = interp or interpreter()
    msg = "feedmesh needs numpy, which %s cannot import (%s). Install it for this interpreter: %s." % (
        describe(interp), exc, numpy_hint(interp))
    if library is not None:
        problem = library_problem(library, interp)
        if problem:
            msg += " And " + problem[len("feedmesh: ") :]
    return msg


# --- the library -------------------------------------------------------------

# ELF e_machine numbers and names.
_ELF_MACHINES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390x", 40: "arm", 62: "x86_64",
                 183: "aarch64", 243: "riscv64", 258: "loongarch64"}
# Mach-O cputypes.
_MACHO_CPUS = {7: "i386", 0x01000007: "x86_64", 12: "arm", 0x0100000C: "arm64"}
# uname machines to ELF e_machine, by pointer size.
_HOST_ELF = {("x86_64", 64): 62, ("amd64", 64): 62, ("x86_64", 32): 3, ("i386", 32): 3, ("i486", 32): 3,
             ("i586", 32): 3, ("i686", 32): 3, ("aarch64", 64): 183, ("arm64", 64): 183,
             ("armv7l", 32): 40, ("armv6l", 32): 40, ("aarch64", 32): 40, ("ppc64le", 64): 21,
             ("ppc64", 64): 21, ("s390x", 64): 22, ("riscv64", 64): 243, ("loongarch64", 64): 258}


def host():
    """(os, machine, bits) of this interpreter's process: sys.platform,
    the uname machine and the pointer size (a 32-bit Python on a 64-bit
    kernel is 32-bit)."""
    try:
        machine = os.uname().machine
    except AttributeError:  # Windows
        import platform

        machine = platform.machine()
    return sys.platform, machine.lower(), 64 if sys.maxsize > 2**32 else 32


def binary_kind(path):
    """What the file at path is built for: a dict with format ("ELF",
    "Mach-O", "PE", or None when unknown), bits, machine (a name or
    None); or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            h = f.read(64)
    except OSError:
        return None
    if h[:4] == b"\x7fELF" and len(h) >= 20:
        bits = {1: 32, 2: 64}.get(h[4])
        order = "little" if h[5] == 1 else "big"
        m = int.from_bytes(h[18:20], order)
        if m == 21 and order == "big":
            name = "ppc64 (big-endian)"
        else:
            name = _ELF_MACHINES.get(m, "machine %d" % m)
        return {"format": "ELF", "bits": bits, "machine": name, "elf_machine": m}
    if h[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe") and len(h) >= 8:
        cpu = int.from_bytes(h[4:8], "little")
        return {"format": "Mach-O", "bits": 64 if h[0] == 0xCF else 32, "machine": _MACHO_CPUS.get(cpu, "cpu %#x" % cpu)}
    if h[:4] == b"\xca\xfe\xba\xbe":
        return {"format": "Mach-O", "bits": None, "machine": "universal"}
    if h[:2] == b"MZ":
        return {"format": "PE", "bits": None, "machine": None}
    return {"format": None, "bits": None, "machine": None}


def _kind_text(kind):
    os_name = {"ELF": "Linux (ELF)", "Mach-O": "macOS (Mach-O)", "PE": "Windows (PE)"}.get(kind["format"])
    if os_name is None:
        return "no shared library this platform knows (not ELF, Mach-O or PE)"
    parts = [os_name]
    if kind.get("machine"):
        parts.append(kind["machine"])
    if kind.get("bits"):
        parts.append("%d-bit" % kind["bits"])
    return " ".join(parts)


def foreign(kind, hostinfo=None):
    """Why a library of kind (binary_kind) cannot load on this host, or
    None if it looks right (or the host is one this check does not know)."""
    plat, machine, bits = hostinfo or host()
    want = "Mach-O" if plat == "darwin" else "PE" if plat in ("win32", "cygwin") else "ELF"
    if kind["format"] != want or (kind["bits"] and kind["bits"] != bits):
        return True
    if want == "ELF":
        expect = _HOST_ELF.get((machine, bits))
        return expect is not None and kind["elf_machine"] != expect
    if want == "Mach-O" and kind["machine"] not in ("universal",):
        m = {"x86_64": "x86_64", "amd64": "x86_64", "arm64": "arm64", "aarch64": "arm64"}.get(machine)
        return m is not None and kind["machine"] != m
    return False


def host_text(hostinfo=None):
    plat, machine, bits = hostinfo or host()
    name = {"linux": "Linux", "darwin": "macOS", "win32": "Windows"}.get(plat, plat)
    return "%s %s %d-bit" % (name, machine, bits)


def checkout_root(package_dir):
    """The feedmesh checkout whose python/feedmesh package_dir is, or None
    (an installed package)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(package_dir)))
    try:
        with open(os.path.join(root, "go.mod")) as f:
            first = f.readline().split()
    except OSError:
        return None
    return root if first == ["module", MODULE] else None


def checkout_version(package_dir):
    """The version of the checkout package_dir belongs to
    (internal/version/VERSION), or "unknown"."""
    root = checkout_root(package_dir)
    if root:
        try:
            with open(os.path.join(root, "internal", "version", "VERSION")) as f:
                return f.read().strip()
        except OSError:
            pass
    return "unknown"


def build_hint(path, interp=None, env=None):
    """How to get a library for this interpreter, given that the one at
    path is missing or unusable."""
    interp = interp or interpreter()
    env = os.environ if env is None else env
    exe = interp["executable"]
    package_dir = os.path.dirname(os.path.abspath(__file__))
    root = checkout_root(package_dir)
    pip = "%s -m pip install --no-build-isolation" % exe
    if env.get("FEEDMESH_LIB"):
        return ("FEEDMESH_LIB=%s names it: point FEEDMESH_LIB at a library built for %s, or unset it to use "
                "the package's own (%s)" % (env["FEEDMESH_LIB"], host_text(), os.path.join(package_dir, library_name())))
    if root:
        venv_pip = pip if interp["venv"] else (
            "%s -m venv --system-site-packages VENV && VENV/bin/pip install --no-build-isolation" % exe)
        return ("This feedmesh is the checkout at %s: build the library there with Go >= 1.26 and a C compiler: "
                "cd %s && %s; or install the package with its library: %s %s" % (
                    root, root, GO_BUILD % library_name(), venv_pip, os.path.join(root, "python")))
    return ("This feedmesh (%s) was installed without a library for %s: reinstall it with pip from a feedmesh "
            "checkout, which builds the library (Go >= 1.26 and a C compiler): %s --force-reinstall CHECKOUT/python; "
            "or install a wheel built on a machine of this platform (pip wheel --no-build-isolation --no-deps "
            "CHECKOUT/python there)" % (package_dir, host_text(), pip))


def library_problem(path, interp=None, hostinfo=None):
    """What is wrong with the library at path for this interpreter (None:
    nothing this check sees: it exists and is built for this platform)."""
    if not os.path.exists(path):
        others = []
        d = os.path.dirname(path)
        if os.path.isdir(d) and not os.environ.get("FEEDMESH_LIB"):
            others = sorted(n for n in os.listdir(d) if n.startswith("libfeedmesh.") and n != os.path.basename(path)
                            and not n.endswith(".h"))
        msg = "feedmesh: the Go library is not at %s" % path
        if others:
            msg += " (%s, next to it, is for another platform)" % ", ".join(others)
        return "%s: %s cannot use feedmesh without it. %s." % (msg, describe(interp or interpreter()), build_hint(path, interp))
    kind = binary_kind(path)
    if kind is not None and foreign(kind, hostinfo):
        return "feedmesh: the Go library %s is built for %s, and %s runs on %s. %s." % (
            path, _kind_text(kind), describe(interp or interpreter()), host_text(hostinfo), build_hint(path, interp))
    return None


def load_failed(path, exc, interp=None):
    """The message for a library that exists, looks built for this
    platform, and still does not load (exc: ctypes' OSError)."""
    text = str(exc)
    why = ""
    if "GLIBC" in text:
        why = " It was built on a system with a newer C library (glibc) than this one's."
    elif "wrong ELF class" in text or "invalid ELF header" in text or "file too short" in text:
        why = " It is not a shared library for this platform (damaged, or built for another one)."
    return "feedmesh: cannot load the Go library %s into %s: %s.%s %s." % (
        path, describe(interp or interpreter()), text, why, build_hint(path, interp))
