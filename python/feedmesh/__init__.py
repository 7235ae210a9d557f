"""feedmesh: read a feedmesh cluster's jobs from Python, zero-copy.

    import feedmesh
    client = feedmesh.Client("10.0.0.5:7947")              # any node
    it = client.distribute("spec.yaml", job="run-7", epochs=3)
    for batch in it:                                        # dict: tensor name -> numpy.ndarray
        step(batch["tokens"], batch["tokens_length"])
    print(it.stats())

The package is the Go client (package client) built as a C shared library
(cmd/libfeedmesh), loaded with ctypes on first use: the same behaviour
under failure, the same messages. It needs only the standard library and
numpy; feedmesh.torch adds a PyTorch IterableDataset, feedmesh.jax
multi-host reading and device prefetch for JAX, feedmesh.progress a
progress line. The Go client's log goes to Python's logging (logger
"feedmesh"). Type hints are checked (py.typed). The first Client
says exactly what this interpreter lacks (numpy, or a library built for
its platform) and how to get it. docs/python/ has the whole story
(install with pip, fork, signals, errors).
"""

from ._errors import (
    BadCheckpoint,
    Closed,
    Error,
    ForkError,
    InvalidArgument,
    InvalidSpec,
    JobFinished,
    JobInUse,
    NoQuorum,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from ._client import Batch, BytesTensor, Client, Iterator, live_batches
from ._lib import library_path, library_version
from ._progress import progress

try:
    from ._version import __version__  # written by python/setup.py into what pip installs
except ImportError:  # a checkout on PYTHONPATH: its internal/version/VERSION
    from ._checks import checkout_version as _checkout_version

    __version__ = _checkout_version(__path__[0])
    del _checkout_version

__all__ = [
    "__version__", "Client", "Iterator", "Batch", "BytesTensor", "live_batches", "library_path", "library_version",
    "progress",
    "Error", "NotFound", "NoQuorum", "InvalidSpec", "InvalidArgument", "JobInUse", "JobFinished",
    "BadCheckpoint", "Closed", "Unavailable", "PermissionDenied", "ForkError",
]
