"""JAX: a feedmesh job read on every host of a (multi-host) JAX program,
and batches prefetched to the devices.

    import feedmesh, feedmesh.jax as fmjax
    client = feedmesh.Client("10.0.0.5:7947")
    it = fmjax.distribute(client, "spec.yaml", job="run-7")   # this host's share
    for batch in fmjax.prefetch_to_device(it, size=2):       # dicts of jax.Array
        state = train_step(state, batch)

distribute() maps JAX's processes to the job's consumers: every host
calls it, and jax.process_index() / jax.process_count() become
consumer_index / num_consumers, so each host is one consumer and, with
coordinated reads (the default with consumer_index), every host gets its
batch of each step in lockstep. prefetch_to_device() keeps `size` batches
on their way to the devices (jax.device_put is asynchronous), so the
step does not wait for the copy.

JAX is imported on first use: this module imports without it.
"""

import collections
from typing import Any, Deque, Dict, Iterable, Iterator, Optional

__all__ = ["distribute", "prefetch_to_device", "to_device"]


def _jax():
    try:
        import jax
    except ImportError as e:
        raise ImportError("feedmesh.jax needs JAX (%s): pip install jax" % e) from None
    return jax


def distribute(client: Any, spec: Any, job: str, **job_options: Any) -> Any:
    """client.distribute(spec, job, ...) with this JAX process as consumer
    jax.process_index() of jax.process_count(): num_consumers and, for
    coordinated reads (the default then: every host gets its batch of each
    round in lockstep; the spec must end in bucket_by_sequence_length),
    consumer_index. With coordinated=False each host is one consumer of a
    DYNAMIC job and reads a share of its own size. Keywords given win; a
    single process reads the job as its one consumer."""
    jax = _jax()
    count, index = jax.process_count(), jax.process_index()
    if count > 1:
        job_options.setdefault("num_consumers", count)
        if job_options.get("coordinated", True):
            job_options.setdefault("consumer_index", index)
    return client.distribute(spec, job, **job_options)


def to_device(batch: Any, device: Any = None) -> Dict[str, Any]:
    """The batch as a dict of arrays put on device (jax.device_put: a
    jax.Device, a Sharding, or None for the default device); a bytes
    tensor (feedmesh.BytesTensor) stays on the host as it is."""
    jax = _jax()
    out = {}
    for k, v in dict(batch).items():
        out[k] = v if not hasattr(v, "dtype") else jax.device_put(v, device)
    return out


def prefetch_to_device(iterator: Iterable[Any], size: int = 2, device: Any = None) -> Iterator[Dict[str, Any]]:
    """Yields iterator's batches put on device, keeping up to size of them
    on their way (device_put returns at once; the copy runs while the step
    before computes)."""
    if size < 1:
        raise ValueError("prefetch_to_device: size must be >= 1")
    queue: Deque[Dict[str, Any]] = collections.deque()
    it = iter(iterator)
    for b in it:
        queue.append(to_device(b, device))
        if len(queue) >= size:
            break
    while queue:
        out = queue.popleft()
        for b in it:
            queue.append(to_device(b, device))
            break
        yield out
