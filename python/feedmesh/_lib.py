"""Loading libfeedmesh (the Go client as a C shared library) with ctypes,
its C declarations, and the fork guard.

The library is loaded on first use (the first Client), not at import: a
process that only imports feedmesh starts no Go runtime, and a child it
forks before that first use can load the library itself.
"""

import ctypes
import json
import os
import threading

from . import _checks
from ._errors import Error, ForkError, from_code

# Must equal abiVersion in cmd/libfeedmesh/errors.go.
ABI_VERSION = 4

# Outcomes of fm_next and fm_next_meta (cmd/libfeedmesh/errors.go);
# errors are 10 and above. MORE: fm_next_meta's buffer is too small.
OK, END, TIMEOUT, MORE = 0, 1, 2, 3

# fm_next_meta's record (cmd/libfeedmesh/capi.go): a header of META_HEADER
# int64 words (length, handle, seq, epoch, rows, round, bucket, worker's
# name number, number of tensors, number of names the iterator has), then
# per tensor META_TENSOR words (name number, dtype, ndim, data address,
# nbytes, offsets address, noffsets) and its ndim dimensions.
META_HEADER, META_TENSOR = 10, 7

# The dtypes' numbers (tensor.DType).
BYTES = 10


# fm_next's structs: the package reads batches with fm_next_meta; these
# stay for callers of fm_next (and its test).
class CTensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_int64),
        ("offsets", ctypes.c_void_p),
        ("noffsets", ctypes.c_int64),
    ]


class CBatch(ctypes.Structure):
    _fields_ = [
        ("handle", ctypes.c_uint64),
        ("worker", ctypes.c_char_p),
        ("seq", ctypes.c_uint64),
        ("epoch", ctypes.c_int64),
        ("rows", ctypes.c_int64),
        ("ntensors", ctypes.c_int32),
        ("bucket", ctypes.c_int32),
        ("tensors", ctypes.POINTER(CTensor)),
        ("round", ctypes.c_int64),
    ]


_u64, _i32, _i64, _vp = ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
_P = ctypes.POINTER

# name: (restype, argtypes). Messages come back as void* (not c_char_p,
# which would convert them and lose the pointer to free).
_SIGNATURES = {
    "fm_abi_version": (_i32, []),
    "fm_free": (None, [_vp]),
    "fm_version": (_vp, []),
    "fm_dial": (_i32, [ctypes.c_char_p, ctypes.c_char_p, _P(_u64), _P(_vp)]),
    "fm_client_close": (_i32, [_u64, _P(_vp)]),
    "fm_distribute": (_i32, [_u64, _i32, ctypes.c_char_p, _i64, ctypes.c_char_p, ctypes.c_char_p, _i64, _P(_u64), _P(_vp)]),
    "fm_attach": (_i32, [_u64, ctypes.c_char_p, _P(_u64), _P(_vp)]),
    "fm_next": (_i32, [_u64, _i32, _P(_P(CBatch)), _P(_vp)]),
    "fm_next_meta": (_i32, [_u64, _i32, _vp, _i64, _P(_vp)]),
    "fm_iter_name": (_i32, [_u64, _i64, _P(_vp), _P(_vp)]),
    "fm_batch_release": (_i32, [_u64]),
    "fm_live_batches": (_i64, []),
    "fm_checkpoint": (_i32, [_u64, _P(_vp), _P(_i64), _P(_vp)]),
    "fm_stats": (_i32, [_u64, _P(_vp), _P(_vp)]),
    "fm_audit": (_i32, [_u64, _P(_vp), _P(_vp)]),
    "fm_iter_close": (_i32, [_u64, _P(_vp)]),
    "fm_job": (_i32, [_u64, ctypes.c_char_p, _P(_vp), _P(_vp)]),
    "fm_log_seq": (_vp, []),
    "fm_logs": (_i32, [_P(_vp), _P(_vp)]),
}

_lib = None
_lock = threading.Lock()
_forked_from = None  # in a forked child: the pid of the parent that had loaded the library

FORK_MESSAGE = (
    "feedmesh cannot be used in a process forked (pid {child}) after feedmesh's Go library "
    "was loaded in its parent (pid {parent}): the Go runtime does not survive fork(). "
    "Supported patterns: read in the main process (torch DataLoader num_workers=0: the data is "
    "already prepared by the cluster), or start worker processes with the spawn method "
    "(DataLoader(..., multiprocessing_context=\"spawn\"), multiprocessing.get_context(\"spawn\")); "
    "each spawned worker is its own consumer of the same job."
)


def _after_fork_in_child():
    global _forked_from
    if _lib is not None and _forked_from is None:
        _forked_from = os.getppid()


os.register_at_fork(after_in_child=_after_fork_in_child)


def check_fork():
    """Raises ForkError in a process forked after the library was loaded."""
    if _forked_from is not None:
        raise ForkError(FORK_MESSAGE.format(child=os.getpid(), parent=_forked_from))


def usable():
    """Whether finalizers may call the library: loaded, and not in a forked
    child (where calling into the dead Go runtime would hang)."""
    return _lib is not None and _forked_from is None


def library_path() -> str:
    """Where the library is looked for: $FEEDMESH_LIB, else next to this
    package."""
    env = os.environ.get("FEEDMESH_LIB")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _checks.library_name())


def lib():
    """The loaded library (loading it on first use)."""
    check_fork()
    if _lib is None:
        with _lock:
            if _lib is None:
                _load()
    return _lib


def _load():
    global _lib
    path = library_path()
    problem = _checks.library_problem(path)  # missing, or built for another platform
    if problem:
        raise Error(problem)
    # CDLL (not PyDLL): every call releases the GIL, so other Python
    # threads run while one waits for a batch.
    try:
        handle = ctypes.CDLL(path)
    except OSError as e:
        raise Error(_checks.load_failed(path, e)) from None
    for name, (res, args) in _SIGNATURES.items():
        try:
            f = getattr(handle, name)
        except AttributeError:
            raise Error("feedmesh: %s lacks %s: rebuild it from the same checkout as this package" % (path, name)) from None
        f.restype, f.argtypes = res, args
    v = handle.fm_abi_version()
    if v != ABI_VERSION:
        raise Error(
            "feedmesh: %s speaks C API version %d, this package %d: rebuild the library "
            "from the same checkout as this package" % (path, v, ABI_VERSION)
        )
    global _log_seq
    _log_seq = ctypes.c_int64.from_address(handle.fm_log_seq())
    _lib = handle


# The Go client's log records (cmd/libfeedmesh/logs.go) go to Python's
# logging, logger "feedmesh": the library keeps them, and every call here
# that may have logged drains them (a look at a counter in the library's
# memory when there are none). Client(log_level=) sets the least level
# the library keeps ("warn" by default); logging's configuration decides
# what is shown (with none, Python shows warnings and errors on stderr).
# (logging is imported with the first records: `import feedmesh` stays
# cheap.)
_log_seq = None  # ctypes.c_int64 at the library's count of records kept
_log_seen = 0


def drain_logs():
    """Logs the Go client's records kept since the last drain."""
    global _log_seen
    seq = _log_seq.value if _log_seq is not None else 0
    if seq == _log_seen or not usable():
        return
    _log_seen = seq
    out = ctypes.c_void_p()
    errp = ctypes.c_void_p()
    if _lib.fm_logs(ctypes.byref(out), ctypes.byref(errp)) != OK:
        take_string(errp.value)
        return
    import logging

    log = logging.getLogger("feedmesh")
    for r in json.loads(take_string(out.value)):
        lv = r.get("level", 0)  # slog's: debug -4, info 0, warn 4, error 8
        level = logging.DEBUG if lv < 0 else logging.INFO if lv < 4 else logging.WARNING if lv < 8 else logging.ERROR
        log.log(level, "%s", r.get("msg", ""))


def library_version() -> str:
    """The version the library was built from (fm_version), loading it
    if need be: feedmesh.__version__ when both come from one build."""
    return take_string(lib().fm_version())


def take_string(ptr):
    """The text of a C string the library allocated, which it frees."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        _lib.fm_free(ptr)


def error(code, errp):
    """The exception for a failed call's code and message."""
    return from_code(code, take_string(errp.value))


def call(name, *args):
    """Calls fm_<name>(*args, &err) and raises its error, if any."""
    errp = ctypes.c_void_p()
    rc = getattr(lib(), name)(*args, ctypes.byref(errp))
    drain_logs()
    if rc != OK:
        raise error(rc, errp)
