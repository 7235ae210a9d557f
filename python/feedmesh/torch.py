"""PyTorch: FeedmeshDataset, a torch.utils.data.IterableDataset over a
feedmesh job.

    from feedmesh.torch import FeedmeshDataset
    ds = FeedmeshDataset("10.0.0.5:7947", "spec.yaml", job="run-7")
    loader = torch.utils.data.DataLoader(ds, batch_size=None)   # batches come batched

Each item is a dict of tensor name -> torch.Tensor (torch.from_numpy of
the batch's arrays: no copy; bytes tensors stay feedmesh.BytesTensor).

Workers: with num_workers=0 the main process reads the job (the data is
already prepared by the cluster, so workers add little). With worker
processes, start them with spawn (DataLoader(...,
multiprocessing_context="spawn")): each worker process dials the cluster
and joins the same job by name (Client.distribute with the same options),
so it is one more consumer of the job, and each batch goes to one of
them (with DYNAMIC exactly-once sharding, every element reaches one
worker once). Forked workers (the default start method on Linux) cannot
use a library their parent loaded: they raise feedmesh.ForkError.

Epochs: a job is one run of its dataset (give it epochs= for several
passes, read in one DataLoader pass); a second iteration of a job that
has run to its end raises feedmesh.JobFinished (it would deliver
nothing). To iterate the DataLoader once per epoch, call set_epoch(e)
before each, as with DistributedSampler: the job is then named
"<job>-epoch<e>". (A DataLoader worker process that joins the job after
its fellow workers of the same iteration have read it all gets no batch,
and no error: there was nothing left for it.)

Checkpoints: state_dict() / load_state_dict() carry Iterator.checkpoint()
of the iteration in this process: load_state_dict() makes the next
iteration resume the job from it (exactly-once DYNAMIC jobs). With
num_workers=0 that is the loader's state. With worker processes each
worker's copy is one consumer and checkpoints its own part: torchdata's
StatefulDataLoader calls each worker's state_dict() after the batches it
fetches, keeps the state of the last batch the loop received from each
worker, and gives each worker its own back through load_state_dict()
before it iterates (the resumed job waits for every worker's
checkpoint). The main process's copy of a dataset iterated by worker
processes has no checkpoint of theirs: its state_dict() (and stats())
raise feedmesh.Error rather than return an empty one.
"""

import logging
import math
import time
from typing import Any, Dict, Iterator, Mapping, Optional, Set

import numpy as np
import torch
from torch.utils.data import IterableDataset

from . import _client
from ._errors import Error, JobFinished

_log = logging.getLogger("feedmesh")

try:
    from ml_dtypes import bfloat16 as _ml_bf16
except ImportError:
    _ml_bf16 = None


def to_torch(v: Any) -> Any:
    """A torch.Tensor sharing v's memory (BytesTensor stays as it is)."""
    if isinstance(v, np.ndarray):
        if v.dtype == np.uint16 or (_ml_bf16 is not None and v.dtype == _ml_bf16):
            # bfloat16 (numpy has none of its own): same bits, torch's dtype
            return torch.from_numpy(v.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(v)
    return v


class FeedmeshDataset(IterableDataset):
    """Iterates a feedmesh job: every iteration (every epoch of the
    DataLoader) calls Client.distribute(spec, job, **job_options) and yields
    its batches as dicts of torch tensors.

    addr: any node's QUIC address. client_options: keywords of
    feedmesh.Client (tls_ca, ...). job_options: keywords of
    Client.distribute (sharding, epochs, num_consumers, consumer_index,
    share, compression, ...). offload defaults to "auto" in the process
    that iterates (DataLoader num_workers=0), as for Client.distribute, and
    to "remote" in a DataLoader's worker processes: they are as many
    consumers on one host, and each profiling a local worker within "the
    spare CPUs" would count the same CPUs once per process. Pass offload=
    to choose."""

    def __init__(self, addr: str, spec: Any, job: str, *, client_options: Optional[Mapping[str, Any]] = None,
                 **job_options: Any) -> None:
        super().__init__()
        if "resume" in job_options:
            raise TypeError("FeedmeshDataset: give a checkpoint with load_state_dict(), not resume=")
        self.addr, self.spec, self.job = addr, spec, job
        self.client_options = dict(client_options or {})
        self.job_options = dict(job_options)
        self._resume: Optional[bytes] = None
        self._client: Optional[_client.Client] = None
        self._it: Optional[_client.Iterator] = None
        self._epoch: Optional[int] = None
        # Set in this object when it is pickled for a worker process
        # (copied away) and not iterated here since: its state is the
        # workers'. In the copy: when it was made, the start of the
        # DataLoader iteration it serves.
        self._copied = False
        self._copied_at: Optional[float] = None
        self._read: Set[str] = set()  # job names iterated by this object (this process)

    def set_epoch(self, epoch: int) -> None:
        """Names the job of the next iteration "<job>-epoch<epoch>"."""
        self._epoch = int(epoch)

    def job_name(self) -> str:
        """The job the next iteration reads."""
        return self.job if self._epoch is None else "%s-epoch%d" % (self.job, self._epoch)

    def __getstate__(self) -> Dict[str, Any]:
        # A spawned worker gets the recipe, not the connections. The
        # DataLoader pickles the dataset for its workers as its iteration
        # starts: the copy records when, and this object that its state is
        # now the workers'.
        self._copied = True
        s = self.__dict__.copy()
        s["_client"] = s["_it"] = None
        s["_copied"], s["_copied_at"], s["_read"] = False, time.time(), set(self._read)
        return s

    def _get_client(self) -> "_client.Client":
        if self._client is None:
            self._client = _client.Client(self.addr, **self.client_options)
        return self._client

    def job_options_here(self) -> Dict[str, Any]:
        """The keywords of this process's distribute: job_options, with
        offload's default for where it runs (see the class doc)."""
        opts = self.job_options
        if "offload" not in opts:
            in_worker = torch.utils.data.get_worker_info() is not None
            opts = dict(opts, offload="remote" if in_worker else "auto")
        return opts

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        client = self._get_client()
        self._close_iterator()
        self._copied = False
        name = self.job_name()
        try:
            it = client.distribute(self.spec, name, resume=self._resume, **self.job_options_here())
        except JobFinished:
            if not self._late_worker(client, name):
                raise
            _log.info("feedmesh: job %r: the other DataLoader workers of this iteration read it to its end before "
                      "this one joined: nothing left for this worker", name)
            self._read.add(name)
            return iter(())
        finally:
            self._read.add(name)
        self._resume = None
        self._it = it
        return self._batches(it)

    def _late_worker(self, client: "_client.Client", name: str) -> bool:
        """Whether this process is a DataLoader worker that found the job
        finished by its fellow workers of the same iteration (not a job
        finished before the iteration began: reading it again is an
        error): the job was created after the DataLoader pickled this copy
        for the iteration (to the second: the cluster's clock, in whole
        seconds), and this copy has not read it before."""
        info = torch.utils.data.get_worker_info()
        if info is None or info.num_workers < 2 or self._copied_at is None or name in self._read:
            return False
        try:
            created = client.job(name)["created_at_unix"]
        except Error:
            return False
        # The cluster says when in whole seconds: a job created in the
        # second the iteration began counts as the iteration's.
        return created >= math.floor(self._copied_at)

    @staticmethod
    def _batches(it: "_client.Iterator") -> Iterator[Dict[str, Any]]:
        try:
            for b in it:
                yield {k: to_torch(v) for k, v in b.items()}
        finally:
            # Abandoned or finished: detach from the job (the checkpoint
            # stays available through state_dict()).
            it.close()

    def _check_here(self, what: str) -> None:
        if self._copied:
            raise Error(
                "feedmesh: FeedmeshDataset.%s() of job %r in the process that gave copies of the dataset to "
                "DataLoader worker processes: the workers read the job, each its own consumer, and their %s "
                "are theirs, not this copy's. Use torchdata's StatefulDataLoader (its state_dict() collects each "
                "worker's dataset state_dict(), and load_state_dict() gives each its own back), or num_workers=0"
                % (what, self.job_name(), "checkpoints" if what == "state_dict" else "statistics"))

    def state_dict(self) -> Dict[str, Any]:
        """{"job", "epoch" (set_epoch's, or None), "checkpoint": bytes or
        None}: exactly the batches this process's iteration yielded (None
        before any iteration). Raises feedmesh.Error in the process whose
        DataLoader iterates the dataset in worker processes (see the module
        doc): a checkpoint there could not be complete."""
        self._check_here("state_dict")
        ck = self._resume
        if self._it is not None:
            ck = self._it.checkpoint()
        return {"job": self.job, "epoch": self._epoch, "checkpoint": ck}

    def stats(self) -> Dict[str, Any]:
        """Iterator.stats() of this process's iteration (the current one,
        or the last one's as of its end): batches, elements, bytes,
        workers, job_state, stall_fraction, warnings (fewer splits than
        workers, say), ... Raises feedmesh.Error before any iteration, and
        in the process whose DataLoader iterates in worker processes."""
        self._check_here("stats")
        if self._it is None:
            raise Error("feedmesh: FeedmeshDataset.stats() of job %r: no iteration has started in this process" % self.job_name())
        return self._it.stats()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Makes the next iteration resume from state's checkpoint (stops
        the current iteration, if any: a resumed job wants no other
        consumer of its old run attached)."""
        if state.get("job") != self.job:
            raise Error("feedmesh: state_dict of job %r loaded into a dataset of job %r" % (state.get("job"), self.job))
        self._close_iterator()
        self._it = None
        self._epoch = state.get("epoch")
        self._resume = state.get("checkpoint")

    def _close_iterator(self) -> None:
        if self._it is not None:
            self._it.close()

    def close(self) -> None:
        """Stops the iteration and closes the connection."""
        self._close_iterator()
        if self._client is not None:
            self._client.close()
            self._client = None
