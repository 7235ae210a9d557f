"""progress(): a one-line progress display for loops over feedmesh
iterators, for notebooks and terminals, with no dependency (tqdm-like)."""

from __future__ import annotations  # the hints cost `import feedmesh` nothing

import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Iterator, Optional, TextIO, TypeVar

    T = TypeVar("T")


def progress(iterable: Iterable[T], *, every: float = 0.5, file: Optional[TextIO] = None,
             total: Optional[int] = None, desc: Optional[str] = None) -> Iterator[T]:
    """Yields iterable's items and keeps one line up to date on file
    (sys.stderr by default) at most every `every` seconds, redrawn in place
    ("\\r", which terminals and Jupyter both honour):

        job run-7: 1,234 batches  39,488 elements  412.3 batches/s  52.1 MB/s  3 workers

    With a feedmesh.Iterator (or anything with a stats() of its kind, such
    as a FeedmeshDataset iterated in this process) the figures are its
    statistics; with anything else, items counted and their rate. total (in
    items) adds a percentage. The last line stays, ended by a newline, when
    the loop ends or is left."""
    out = file if file is not None else sys.stderr
    stats = getattr(iterable, "stats", None)
    name = desc or getattr(iterable, "job", None) or ""
    start = last = time.monotonic()
    n = 0
    shown = False

    def line(now: float) -> str:
        secs = max(now - start, 1e-9)
        parts = []
        st = None
        if stats is not None:
            try:
                st = stats()
            except Exception:  # before the first iteration, or closed
                st = None
        if st:
            parts.append("%s batches" % format(st.get("batches", n), ","))
            parts.append("%s elements" % format(st.get("rows", 0), ","))
            parts.append("%.1f batches/s" % (st.get("batches", n) / secs))
            parts.append("%.1f MB/s" % (st.get("bytes", 0) / secs / 1e6))
            if st.get("serving"):
                parts.append("%d workers" % st["serving"])
        else:
            parts.append("%s items" % format(n, ","))
            parts.append("%.1f items/s" % (n / secs))
        if total:
            parts.append("%.0f%%" % (100.0 * n / total))
        head = ("job %s: " % name) if name else ""
        return "\r" + head + "  ".join(parts)

    try:
        for item in iterable:
            n += 1
            now = time.monotonic()
            if now - last >= every:
                out.write(line(now))
                out.flush()
                last, shown = now, True
            yield item
    finally:
        if shown or n:
            out.write(line(time.monotonic()) + "\n")
            out.flush()
