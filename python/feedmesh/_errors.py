"""feedmesh's exceptions: one per kind of error the Go client reports."""


class Error(Exception):
    """Any error of feedmesh; the message is the Go client's."""


class NotFound(Error, LookupError):
    """The named job (or dataset) does not exist on the cluster."""


class NoQuorum(Error):
    """The cluster cannot commit: too few Raft voters reachable, or no leader."""


class InvalidSpec(Error, ValueError):
    """The dataset spec does not parse or validate."""


class InvalidArgument(Error, ValueError):
    """Bad options (a misspelt keyword, an unknown sharding) or a bad address."""


class JobInUse(Error):
    """Resuming a job that still has consumers attached (close them first)."""


class BadCheckpoint(Error, ValueError):
    """A checkpoint that is truncated, corrupted, of another job or dataset."""


class Closed(Error):
    """A closed client or iterator, or a batch used after release()."""


class Unavailable(Error, ConnectionError):
    """No node answered (a wrong address, or the cluster is down)."""


class PermissionDenied(Error, PermissionError):
    """The cluster refused: a spec names a path, URL or object store the
    nodes' operator does not let specs read (docs/operating/security.md,
    "Data access"), or the caller may not make the request."""


class ForkError(Error):
    """feedmesh used in a process forked after its Go library was loaded."""


class JobFinished(Error):
    """distribute() (without resume=) or attach() of a job that has already
    run to its end: a job is one run of its dataset. Read the dataset again
    under another job name (FeedmeshDataset.set_epoch), or resume from a
    checkpoint."""


# Every exception is feedmesh.X, as the package exports it (not
# feedmesh._errors.X) in tracebacks and reprs.
for _cls in (Error, NotFound, NoQuorum, InvalidSpec, InvalidArgument, JobInUse, BadCheckpoint, Closed, Unavailable,
             ForkError, JobFinished, PermissionDenied):
    _cls.__module__ = "feedmesh"
del _cls

# Status codes of the C library (cmd/libfeedmesh/errors.go) to exceptions.
_BY_CODE = {
    10: Error,
    11: NotFound,
    12: NoQuorum,
    13: InvalidSpec,
    14: JobInUse,
    15: BadCheckpoint,
    16: Closed,
    17: InvalidArgument,
    18: Unavailable,
    19: JobFinished,
    20: PermissionDenied,
}


def from_code(code, message):
    """The exception for a status code of the library."""
    return _BY_CODE.get(code, Error)(message)
