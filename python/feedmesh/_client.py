"""Client, Iterator and Batch: the Go client (package client) through
libfeedmesh."""

from __future__ import annotations  # the hints cost `import feedmesh` nothing

import atexit
import ctypes
import json
import os
import threading
import time
import weakref

TYPE_CHECKING = False  # typing is not imported at run time: `import feedmesh` stays cheap
if TYPE_CHECKING:
    import typing  # typing.Iterator: Iterator is this module's class
    from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

    PathLike = Union[str, "os.PathLike[str]"]
    # A spec: a path, YAML or JSON text, or a dict.
    SpecLike = Union[str, bytes, "os.PathLike[str]", Dict[str, Any]]

from . import _checks, _lib
from ._errors import Closed, Error, InvalidSpec

# The words of an iterator's record buffer at first (fm_next_meta): a
# batch of up to 20 tensors of 4 dimensions fits.
_META_WORDS = 256

# Client's unavailable_timeout by default (client.DefaultUnavailableTimeout).
DEFAULT_UNAVAILABLE_TIMEOUT = 60.0

# How long one fm_next_meta call may wait: between two calls Python handles
# signals (Ctrl-C raises KeyboardInterrupt within about this long).
WAIT_SLICE_MS = 100

_np = None
_BF16 = None


def _numpy():
    """numpy, imported on first use so that `import feedmesh` stays cheap."""
    global _np, _BF16
    if _np is None:
        try:
            import numpy
        except ImportError as e:
            raise _lib.Error(_checks.numpy_missing(e, _lib.library_path())) from None

        try:  # bfloat16 as a numpy dtype, where ml_dtypes (a JAX dependency) is installed
            import ml_dtypes

            _BF16 = numpy.dtype(ml_dtypes.bfloat16)
        except ImportError:
            _BF16 = None
        _np = numpy
    return _np


# tensor.DType -> numpy typestr (little-endian, as on the wire).
# bfloat16 (6) is read as uint16 and viewed as ml_dtypes.bfloat16 when
# available.
_TYPESTR = {1: "|u1", 2: "|i1", 3: "<i4", 4: "<i8", 5: "<f2", 6: "<u2", 7: "<f4", 8: "<f8", 9: "|b1"}
_ITEMSIZE = {1: 1, 2: 1, 3: 4, 4: 8, 5: 2, 6: 2, 7: 4, 8: 8, 9: 1}


class _Owner:
    """Holds one batch of the library. Every array of the batch references
    it (it is each array's base: the arrays are made with
    numpy.asarray(owner) while its __array_interface__ describes one
    tensor), so it is collected, and the batch's buffers go back to the
    client's pool, only once no array of the batch is left."""

    __slots__ = ("handle", "__array_interface__", "__weakref__")

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        h = self.handle
        if h:
            self.handle = 0
            if _lib._lib is not None and _lib._forked_from is None:  # _lib.usable(), inlined
                try:
                    _lib._lib.fm_batch_release(h)
                except Exception:  # interpreter shutdown
                    pass


def _array(owner, ptr, nbytes, shape, dtype):
    """An array of shape and dtype (a dtype number) viewing nbytes at ptr,
    whose base is owner."""
    typestr = _TYPESTR.get(dtype)
    if typestr is None:
        raise _lib.Error("feedmesh: tensor of unknown dtype %d: rebuild the library and package from one checkout" % dtype)
    if nbytes == 0 or not ptr:
        a = _np.zeros(shape, dtype=typestr)
    else:
        owner.__array_interface__ = {"version": 3, "shape": shape, "typestr": typestr, "data": (ptr, False)}
        a = _np.asarray(owner)
    if dtype == 6 and _BF16 is not None:
        a = a.view(_BF16)
    return a


class BytesTensor:
    """A bytes tensor: one byte string per entry of `shape`, as the Go
    batch holds it: `data` (uint8 array, the entries concatenated) and
    `offsets` (int64 array of product(shape)+1 entries; entry i is
    data[offsets[i]:offsets[i+1]]). Both are views of the batch's memory."""

    __slots__ = ("data", "offsets", "shape")

    def __init__(self, data: Any, offsets: Any, shape: Sequence[int]) -> None:
        self.data, self.offsets, self.shape = data, offsets, tuple(shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def entry(self, i: int) -> bytes:
        """The i-th byte string (flat index)."""
        return self.data[self.offsets[i] : self.offsets[i + 1]].tobytes()

    def tolist(self) -> List[bytes]:
        """Every entry as bytes, flat."""
        o = self.offsets.tolist()
        d = self.data.tobytes()
        return [d[o[i] : o[i + 1]] for i in range(len(o) - 1)]

    def __reduce__(self):  # pickles (e.g. to another process) as copies
        return (BytesTensor, (self.data.copy(), self.offsets.copy(), self.shape))

    def __repr__(self):
        return "BytesTensor(shape=%r, %d bytes)" % (self.shape, self.data.size)


class Batch(dict):
    """One batch: a dict of tensor name -> numpy.ndarray (BytesTensor for
    bytes tensors), each a zero-copy view of the buffer the batch was
    received into; plus `worker`, `seq`, `epoch`, `rows`, and for
    coordinated jobs `round` and `bucket` (else -1).

    The buffer goes back to the client for reuse once neither the batch
    nor any of its arrays is referenced any more. release() drops the
    batch's own references at once; using the batch afterwards raises
    feedmesh.Closed, while arrays taken from it before stay valid (the
    buffer is reused only once they are gone too)."""

    __slots__ = ("_owner", "_released", "worker", "seq", "epoch", "rows", "round", "bucket")

    # (annotations only: no class attributes beside the slots)
    worker: str
    seq: int
    epoch: int
    rows: int
    round: int
    bucket: int

    def release(self) -> None:
        """Hands the batch back: see the class doc."""
        self._released = True
        self._owner = None
        dict.clear(self)

    @property
    def released(self) -> bool:
        return self._released

    def _check(self):
        if self._released:
            raise Closed("feedmesh: batch %s/%d used after release()" % (self.worker, self.seq))

    def __getitem__(self, k):
        self._check()
        return dict.__getitem__(self, k)

    def get(self, k: str, default: Any = None) -> Any:
        self._check()
        return dict.get(self, k, default)

    def __iter__(self) -> typing.Iterator[str]:
        self._check()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._check()
        return dict.__len__(self)

    def __contains__(self, k):
        self._check()
        return dict.__contains__(self, k)

    def keys(self) -> typing.KeysView[str]:
        self._check()
        return dict.keys(self)

    def values(self) -> typing.ValuesView[Any]:
        self._check()
        return dict.values(self)

    def items(self) -> typing.ItemsView[str, Any]:
        self._check()
        return dict.items(self)

    def __reduce__(self):  # pickles as a plain dict (numpy pickles copies)
        self._check()
        return (dict, (dict(self),))

    def __repr__(self):
        if self._released:
            return "<feedmesh.Batch released>"
        return "<feedmesh.Batch %s/%d: %s>" % (
            self.worker,
            self.seq,
            ", ".join("%s%s" % (k, list(v.shape)) for k, v in dict.items(self)),
        )


def _make_batch(rec, names, owner):
    """A Batch of fm_next_meta's record rec (a list of ints, the record
    from its word 1, the handle, on), whose arrays all reference owner;
    names is the iterator's list of names by number."""
    b = Batch()
    b._owner, b._released = owner, False
    _, seq, b.epoch, b.rows, b.round, b.bucket, worker, n, _ = rec[:9]
    b.seq = seq & 0xFFFFFFFFFFFFFFFF  # a uint64 sent as int64
    b.worker = names[worker]
    i = 9
    setitem = dict.__setitem__
    for _ in range(n):
        name, dtype, ndim, data, nbytes, offsets, noffsets = rec[i : i + 7]
        shape = tuple(rec[i + 7 : i + 7 + ndim])
        i += 7 + ndim
        if dtype == _lib.BYTES:
            v = BytesTensor(_array(owner, data, nbytes, (nbytes,), 1), _array(owner, offsets, 8 * noffsets, (noffsets,), 4), shape)
        else:
            v = _array(owner, data, nbytes, shape, dtype)
        setitem(b, names[name], v)
    # The arrays hold owner: drop the last tensor's interface (set first,
    # so that the del finds it even in a batch of empty tensors).
    owner.__array_interface__ = None
    del owner.__array_interface__
    return b


for _cls in (BytesTensor, Batch):
    _cls.__module__ = "feedmesh"


def live_batches() -> int:
    """How many batches the library has handed out and not yet had back
    (a test's view of the pool: it stays small under a consumer that keeps
    nothing)."""
    return _lib.lib().fm_live_batches()


def _workers_arg(workers):
    """The workers keyword as the library takes it: "auto", "all" or a
    count (a positive int, sent as its decimal string)."""
    if workers is None or isinstance(workers, str):
        return workers
    if isinstance(workers, int) and not isinstance(workers, bool):
        return str(workers)
    raise TypeError("feedmesh: workers=%r: want \"auto\", \"all\" or a count (int)" % (workers,))


def _skips_arg(v):
    """skip_batches as the library takes it: [[lo, hi], ...]; anything
    else goes as it is, for the library to refuse naming the option."""
    try:
        return [[int(lo), int(hi)] for lo, hi in v]
    except (TypeError, ValueError):
        return v


def _seconds_ns(name, v):
    if v is None:
        return None
    if v < 0:
        raise ValueError("%s must be >= 0 seconds" % name)
    return int(v * 1e9)


def _spec_arg(spec):
    """(kind, bytes) of a spec: a dict (sent as JSON), a path (read as
    `feedmesh read --spec` reads it: relative files resolve against its
    directory), or YAML/JSON text."""
    if isinstance(spec, dict):
        return 0, json.dumps(spec).encode()
    if isinstance(spec, os.PathLike):
        return 1, os.fsencode(os.path.abspath(spec))
    if isinstance(spec, bytes):
        spec = spec.decode("utf-8")
    if not isinstance(spec, str):
        raise TypeError("spec: want a path, YAML or JSON text, or a dict, not %s" % type(spec).__name__)
    one_line = "\n" not in spec.strip()
    if one_line and os.path.isfile(spec):
        return 1, os.fsencode(os.path.abspath(spec))
    if one_line and spec.strip().lower().endswith((".yaml", ".yml", ".json")):
        raise InvalidSpec("invalid dataset spec: no such file: %s" % spec)
    return 0, spec.encode()


class _Closing:
    """A handle's owner: closed at the end of a with block, and when it is
    garbage-collected while its handle is open. At the end of a with block,
    close()'s error (say, Unavailable when the detach finds no node) is
    raised, unless another exception is already on its way out, which it
    must not replace."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Error:
            pass

    def __del__(self):
        try:
            if self._handle and _lib.usable():
                self.close()
        except Exception:
            pass


# Clients not yet closed, closed at exit so that their consumers detach
# at once instead of holding their jobs for their lease.
_open_clients = weakref.WeakSet()


@atexit.register
def _close_all():
    if not _lib.usable():
        return
    for c in list(_open_clients):
        try:
            c.close()
        except Exception:
            pass


class Client(_Closing):
    """A connection to a feedmesh cluster through any of its nodes
    (the Go client.Dial). addr is a node's QUIC address, host:port.

    Keywords are client.Options: tls_ca, tls_cert, tls_key (mutual TLS),
    token (an access token: `feedmesh token create`),
    window, window_bytes, streams_per_worker, prefetch_batches,
    prefetch_bytes, recycle_bytes, heartbeat_interval, request_timeout,
    receipt_interval (seconds), resume_wait (seconds, default 120: how
    long an iterator resumed from a checkpoint waits for the checkpoints
    of the job's other consumers before next() raises feedmesh.Error;
    negative: for ever), transport ("default" or "fast"), dial_timeout
    (seconds, default 10), unavailable_timeout (seconds, default 60: an
    iteration that hears nothing from the cluster for so long, every node
    down, ends with feedmesh.Unavailable, or NoQuorum when nodes answer but
    cannot commit, and close() then returns at once; None or 0: wait for
    ever) and log_level (the least level of the Go client's records handed
    to Python's logging, logger "feedmesh": "warn" by default, "info",
    "debug", "error", "off"; at "warn" each job's one INFO line of its
    offload and workers decision is handed over too), offload_profiles (a
    file where offload="auto" remembers what it measured of a pipeline on
    this host, for later jobs that name the same file; by default nothing
    is kept) and offload_colocation ("detect", the default: when every
    live worker node runs on this host, offload="auto" runs remote without
    profiling, the nodes using this host's CPUs; "ignore": decide by
    measurement)."""

    def __init__(self, addr: str, *, tls_ca: Optional[PathLike] = None, tls_cert: Optional[PathLike] = None,
                 tls_key: Optional[PathLike] = None, token: Optional[str] = None, window: Optional[int] = None,
                 window_bytes: Optional[int] = None,
                 streams_per_worker: Optional[int] = None, prefetch_batches: Optional[int] = None,
                 prefetch_bytes: Optional[int] = None, recycle_bytes: Optional[int] = None,
                 heartbeat_interval: Optional[float] = None, request_timeout: Optional[float] = None,
                 receipt_interval: Optional[float] = None, transport: Optional[str] = None,
                 dial_timeout: Optional[float] = None, log_level: Optional[str] = None,
                 resume_wait: Optional[float] = None,
                 unavailable_timeout: Optional[float] = DEFAULT_UNAVAILABLE_TIMEOUT,
                 offload_profiles: Optional[PathLike] = None, offload_colocation: Optional[str] = None) -> None:
        if unavailable_timeout is not None and unavailable_timeout < 0:
            raise ValueError("unavailable_timeout must be >= 0 seconds (None or 0: wait for ever)")
        opts = {
            "tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key, "token": token, "window": window,
            "window_bytes": window_bytes, "streams_per_worker": streams_per_worker,
            "prefetch_batches": prefetch_batches, "prefetch_bytes": prefetch_bytes,
            "recycle_bytes": recycle_bytes, "heartbeat_interval": heartbeat_interval,
            "request_timeout": request_timeout, "receipt_interval": receipt_interval,
            "transport": transport, "dial_timeout": dial_timeout, "log_level": log_level,
            "resume_wait": resume_wait,
            "unavailable_timeout": unavailable_timeout if unavailable_timeout else -1,
            "offload_profiles": offload_profiles, "offload_colocation": offload_colocation,
        }
        opts = {k: (os.fspath(v) if k.startswith("tls_") or k == "offload_profiles" else v)
                for k, v in opts.items() if v is not None}
        self.addr = addr
        self._handle = 0
        self._iters = weakref.WeakSet()
        _numpy()  # batches are numpy arrays: say now if numpy is missing
        h = ctypes.c_uint64()
        _lib.call("fm_dial", addr.encode(), json.dumps(opts).encode(), ctypes.byref(h))
        self._handle = h.value
        _open_clients.add(self)

    def _live(self):
        _lib.check_fork()
        if not self._handle:
            raise Closed("feedmesh: client of %s is closed" % self.addr)
        return self._handle

    def distribute(self, spec: SpecLike, job: str, *, sharding: Optional[str] = "dynamic",
                   epochs: Optional[int] = None, delivery: Optional[str] = None,
                   num_consumers: Optional[int] = None, consumer_index: Optional[int] = None,
                   coordinated: Optional[bool] = None, pad_final_round: Optional[bool] = None,
                   share: Optional[bool] = None, compression: Optional[str] = None,
                   max_workers: Optional[int] = None, consumer_ttl: Optional[float] = None,
                   gc_after: Optional[float] = None, resume: Optional[bytes] = None,
                   autoscale: Optional[bool] = None, workers: Union[str, int, None] = None,
                   offload: Union[str, float, None] = None, local_cpus: Optional[float] = None,
                   autoscale_threshold: Optional[float] = None, autoscale_revisit: Optional[int] = None,
                   autoscale_pause: Optional[int] = None, offload_boundary: Optional[int] = None,
                   order: Optional[str] = None, seed: Optional[int] = None,
                   reorder_batches: Optional[int] = None,
                   skip_batches: Optional[Sequence[Tuple[int, int]]] = None) -> Iterator:
        """Creates the job (or joins it, if one of that name exists with the
        same options) and returns an Iterator over its batches.

        spec: a path, YAML/JSON text, or a dict. Keywords are
        client.JobOptions: sharding ("dynamic" by default, as `feedmesh
        read`; "off", "static"), epochs, delivery ("exactly-once",
        "at-most-once"), num_consumers and consumer_index (a rank: with
        consumer_index, coordinated defaults to True), pad_final_round,
        share, compression ("lz4", "zstd"), workers ("all": every node,
        the default; a count, e.g. 4; or "auto": the cluster chooses the
        number of workers from this reader's batch time and queue, for
        dynamic jobs without share or coordinated reads), max_workers (with workers="auto", the most it may get;
        alone, a fixed count), autoscale (the same as workers="auto"),
        consumer_ttl and gc_after (seconds), resume (bytes of
        Iterator.checkpoint()), offload ("auto" by default, "remote",
        "local", or a local fraction such as 0.3: where a dynamic job's
        pipeline runs, this process or the nodes; see docs/jobs/offload.md)
        and local_cpus (this process's CPU budget for it, in cores; 0 or
        None: the spare CPUs measured), offload_boundary (a
        partial offload: the nodes run the source and the spec's first N
        ops and ship single elements, this process runs the rest; an
        exactly-once dynamic job). With workers="auto",
        autoscale_threshold (the batch-time gain a worker must bring,
        default 0.03), autoscale_revisit and autoscale_pause (in metrics
        of 100 batches: default 10 and 2; a pause of -1 ignores none) tune
        the policy (docs/jobs/autoscaling.md). order="deterministic"
        (written into the spec, with seed when given) delivers the same
        sequence of batches at any cluster size, through node deaths and
        resumes, reordered here under reorder_batches (default 4096;
        docs/jobs/deterministic-order.md); skip_batches, ranges (lo, hi)
        of this reader's batch sequence over the run (its steps), passes
        over those and nothing else (a checkpoint records them);
        Iterator.audit() reports its visitation digests."""
        h = self._live()
        if coordinated is None:
            coordinated = consumer_index is not None
        opts = {
            "name": job, "sharding": sharding, "epochs": epochs, "delivery": delivery,
            "num_consumers": num_consumers, "consumer_index": consumer_index, "coordinated": coordinated,
            "pad_final_round": pad_final_round, "share": share, "compression": compression,
            "max_workers": max_workers, "consumer_ttl": _seconds_ns("consumer_ttl", consumer_ttl),
            "gc_after": _seconds_ns("gc_after", gc_after), "autoscale": autoscale,
            "workers": _workers_arg(workers),
            "offload": None if offload is None else str(offload), "local_cpus": local_cpus,
            "autoscale_threshold": autoscale_threshold, "autoscale_revisit": autoscale_revisit,
            "autoscale_pause": autoscale_pause, "offload_boundary": offload_boundary,
            "order": order, "seed": seed, "reorder_batches": reorder_batches,
            "skip_batches": None if skip_batches is None else _skips_arg(skip_batches),
        }
        opts = {k: v for k, v in opts.items() if v is not None}
        kind, text = _spec_arg(spec)
        if resume is not None:
            resume = bytes(resume)
        out = ctypes.c_uint64()
        _lib.call("fm_distribute", h, kind, text, len(text), json.dumps(opts).encode(),
                  resume, len(resume) if resume else 0, ctypes.byref(out))
        return self._iterator(out.value, job)

    def attach(self, job: str) -> Iterator:
        """Joins an existing job by name, without its spec (NotFound if
        there is none)."""
        h = self._live()
        out = ctypes.c_uint64()
        _lib.call("fm_attach", h, job.encode(), ctypes.byref(out))
        return self._iterator(out.value, job)

    def job(self, name: str) -> Dict[str, Any]:
        """The job named name as the cluster holds it, a dict (api.JobInfo):
        state ("running", "finished", "failed"), consumers, workers,
        num_splits, options, created_at (and created_at_unix, in seconds),
        ... NotFound if there is none."""
        h = self._live()
        out = ctypes.c_void_p()
        _lib.call("fm_job", h, name.encode(), ctypes.byref(out))
        return json.loads(_lib.take_string(out.value))

    def _iterator(self, handle, job):
        it = Iterator(self, handle, job)
        self._iters.add(it)
        return it

    def close(self) -> None:
        """Closes the client's iterators (detaching them from their jobs),
        then the client. Batches already returned stay valid."""
        h, self._handle = self._handle, 0
        for it in list(self._iters):
            it._forget()
        if h and _lib.usable():
            _lib.call("fm_client_close", h)
        _open_clients.discard(self)



class Iterator(_Closing):
    """A job's batches (the Go client.Iterator): iterate it for Batch
    objects; it ends at the end of the job's data."""

    def __init__(self, client: Client, handle: int, job: str) -> None:
        self.client = client
        self.job = job
        self._handle = handle
        self._final_checkpoint = None
        self._final_stats = None
        self._lock = threading.Lock()  # close
        self._next_lock = threading.Lock()  # next: one caller at a time, as the Go Iterator wants
        # Where fm_next_meta describes a batch: word 0 (the record's
        # length) is not 0 while a batch is there that no Batch owns yet
        # (see _claim). Grown when the library asks for more (FM_MORE).
        self._meta = (ctypes.c_int64 * _META_WORDS)()
        self._meta_addr = ctypes.addressof(self._meta)
        self._names = []  # the iterator's names, by number (fm_iter_name)
        self._errp = ctypes.c_void_p()
        self._errp_ref = ctypes.byref(self._errp)

    def _live(self):
        _lib.check_fork()
        if not self._handle:
            raise Closed("feedmesh: iterator of job %r is closed" % self.job)
        return self._handle

    def __iter__(self) -> Iterator:
        return self

    def next(self, timeout: Optional[float] = None) -> Batch:
        """The next Batch; StopIteration at the end of the data, TimeoutError
        when timeout (seconds) passes first. The wait releases the GIL and
        is cut in slices of 100 ms, so Ctrl-C raises KeyboardInterrupt
        promptly (the iterator stays usable, and a batch that arrived with
        the interrupt is not lost: the next call returns it)."""
        h = self._live()
        lib = _lib._lib  # loaded: the handle is live
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._next_lock:
            while True:
                if self._meta[0]:
                    return self._claim()
                ms = WAIT_SLICE_MS
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("feedmesh: no batch of job %r within %gs" % (self.job, timeout))
                    ms = max(1, min(ms, int(left * 1000)))
                rc = lib.fm_next_meta(h, ms, self._meta_addr, len(self._meta), self._errp_ref)
                if _lib._log_seq.value != _lib._log_seen:
                    _lib.drain_logs()
                if rc == _lib.OK:
                    return self._claim()
                if rc == _lib.END:
                    raise StopIteration
                if rc == _lib.MORE:  # the library keeps the batch for the next call
                    self._grow(self._meta[1])
                    continue
                if rc != _lib.TIMEOUT:
                    raise _lib.error(rc, self._errp)
                h = self._live()  # closed by another thread meanwhile?

    __next__ = next  # (no wrapper: one call less per batch)

    def _grow(self, words):
        """A record buffer of at least words words (new, so word 0 is 0:
        no batch pending)."""
        self._meta = (ctypes.c_int64 * max(words, 2 * len(self._meta)))()
        self._meta_addr = ctypes.addressof(self._meta)

    def _claim(self):
        """The Batch of the batch fm_next_meta described in self._meta. A
        KeyboardInterrupt may strike at any call here (CPython raises it
        after a call returns), so nothing is lost or freed twice: until the
        last two statements the owner holds no handle (dropping it releases
        nothing) and word 0 of self._meta still marks the batch as pending
        (the next call claims it again); those two are stores (an item, an
        attribute), after which CPython does not raise it."""
        meta = self._meta
        rec = meta[1 : meta[0]]
        h = rec[0]
        if rec[8] > len(self._names):
            try:
                self._fetch_names(rec[8])
            except Error:  # the iterator closed meanwhile: the batch is nobody's
                meta[0] = 0
                _lib._lib.fm_batch_release(h)
                raise
        owner = _Owner(0)
        b = _make_batch(rec, self._names, owner)
        meta[0] = 0
        owner.handle = h
        return b

    def _fetch_names(self, n):
        """Caches the iterator's first n names (those not cached yet)."""
        names = self._names
        out = ctypes.c_void_p()
        while len(names) < n:
            _lib.call("fm_iter_name", self._handle, len(names), ctypes.byref(out))
            names.append(_lib.take_string(out.value))

    def _drop_pending(self):
        """Releases a batch fm_next_meta returned that no Batch owns (a
        call cut short by an interrupt), unless a next() is running."""
        if not self._next_lock.acquire(blocking=False):
            return
        try:
            if self._meta[0] and _lib.usable():
                h = self._meta[1]
                self._meta[0] = 0
                _lib._lib.fm_batch_release(h)
        finally:
            self._next_lock.release()

    def checkpoint(self) -> bytes:
        """The checkpoint (bytes) of exactly the batches this iterator
        returned; pass it as distribute(..., resume=) to go on from there.
        Exactly-once DYNAMIC jobs only. After close(), the checkpoint as of
        the close."""
        if not self._handle and self._final_checkpoint is not None:
            return self._final_checkpoint
        h = self._live()
        data, n = ctypes.c_void_p(), ctypes.c_int64()
        _lib.call("fm_checkpoint", h, ctypes.byref(data), ctypes.byref(n))
        try:
            return ctypes.string_at(data.value, n.value) if n.value else b""
        finally:
            _lib.lib().fm_free(data.value)

    def audit(self) -> Optional[List[Dict[str, Any]]]:
        """The visitation audit of a job with order="deterministic" (None
        for another): per epoch, epoch, elements, digest (of the element
        ids of the batches returned, this run's and the checkpoint's it
        resumed from), complete, expected (a complete epoch's digest of
        every element) and match."""
        h = self._live()
        out = ctypes.c_void_p()
        _lib.call("fm_audit", h, ctypes.byref(out))
        return json.loads(_lib.take_string(out.value))

    def stats(self) -> Dict[str, Any]:
        """What was delivered so far (client.Stats as a dict): batches,
        elements, bytes, wire_bytes, seconds, workers (per worker:
        batches it made, elements it sent, of them cut_elements sent one
        by one to a cut job's client-side ops, bytes, wire_bytes; rows is
        elements), job_state, delivery,
        stall_fraction (the share of the loop's time spent waiting for
        data), batch_time_seconds, warnings (what makes the job slower than
        it could be, such as fewer splits than workers), ... After close(),
        the statistics as of the close."""
        if not self._handle and self._final_stats is not None:
            return self._final_stats
        h = self._live()
        out = ctypes.c_void_p()
        _lib.call("fm_stats", h, ctypes.byref(out))
        return json.loads(_lib.take_string(out.value))

    def close(self) -> None:
        """Stops reading and detaches from the job. Batches already
        returned stay valid."""
        with self._lock:
            h = self._handle
            if not h or not _lib.usable():
                self._handle = 0
                return
            self._keep_final()
            self._handle = 0
        self._drop_pending()
        _lib.call("fm_iter_close", h)

    def _keep_final(self):
        """Keeps the checkpoint and statistics as of now, for checkpoint()
        and stats() after close()."""
        try:
            self._final_stats = self.stats()
        except Exception:
            pass
        try:
            self._final_checkpoint = self.checkpoint()
        except Exception:
            pass

    def _forget(self):
        """The client closed this iterator."""
        with self._lock:
            if self._handle and _lib.usable():
                self._keep_final()
            self._handle = 0
        self._drop_pending()


for _cls in (Client, Iterator):
    _cls.__module__ = "feedmesh"
del _cls
