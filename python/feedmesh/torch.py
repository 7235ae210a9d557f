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
passes, read in one DataLoader pass); a second iteration of the same job
name delivers nothing new. To iterate the DataLoader once per epoch, call
set_epoch(e) before each, as with DistributedSampler: the job is then
named "<job>-epoch<e>".

Checkpoints: state_dict() / load_state_dict() carry Iterator.checkpoint()
of the iteration in this process: load_state_dict() makes the next
iteration resume the job from it (exactly-once DYNAMIC jobs). With
num_workers=0 that is the loader's state; with worker processes each
worker's copy is one consumer and checkpoints its own part, as torchdata's
StatefulDataLoader collects and restores per worker (the resumed job waits
for every worker's checkpoint).
"""

import numpy as np
import torch
from torch.utils.data import IterableDataset

from . import _client
from ._errors import Error

try:
    from ml_dtypes import bfloat16 as _ml_bf16
except ImportError:
    _ml_bf16 = None


def to_torch(v):
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

    def __init__(self, addr, spec, job, *, client_options=None, **job_options):
        super().__init__()
        if "resume" in job_options:
            raise TypeError("FeedmeshDataset: give a checkpoint with load_state_dict(), not resume=")
        self.addr, self.spec, self.job = addr, spec, job
        self.client_options = dict(client_options or {})
        self.job_options = dict(job_options)
        self._resume = None
        self._client = None
        self._it = None
        self._epoch = None

    def set_epoch(self, epoch):
        """Names the job of the next iteration "<job>-epoch<epoch>"."""
        self._epoch = int(epoch)

    def job_name(self):
        """The job the next iteration reads."""
        return self.job if self._epoch is None else "%s-epoch%d" % (self.job, self._epoch)

    def __getstate__(self):  # a spawned worker gets the recipe, not the connections
        s = self.__dict__.copy()
        s["_client"] = s["_it"] = None
        return s

    def _get_client(self):
        if self._client is None:
            self._client = _client.Client(self.addr, **self.client_options)
        return self._client

    def job_options_here(self):
        """The keywords of this process's distribute: job_options, with
        offload's default for where it runs (see the class doc)."""
        opts = self.job_options
        if "offload" not in opts:
            in_worker = torch.utils.data.get_worker_info() is not None
            opts = dict(opts, offload="remote" if in_worker else "auto")
        return opts

    def __iter__(self):
        client = self._get_client()
        self._close_iterator()
        it = client.distribute(self.spec, self.job_name(), resume=self._resume, **self.job_options_here())
        self._resume = None
        self._it = it
        return self._batches(it)

    @staticmethod
    def _batches(it):
        try:
            for b in it:
                yield {k: to_torch(v) for k, v in b.items()}
        finally:
            # Abandoned or finished: detach from the job (the checkpoint
            # stays available through state_dict()).
            it.close()

    def state_dict(self):
        """{"job", "epoch" (set_epoch's, or None), "checkpoint": bytes or
        None}: exactly the batches this process's iteration yielded (None
        before any iteration)."""
        ck = self._resume
        if self._it is not None:
            ck = self._it.checkpoint()
        return {"job": self.job, "epoch": self._epoch, "checkpoint": ck}

    def load_state_dict(self, state):
        """Makes the next iteration resume from state's checkpoint (stops
        the current iteration, if any: a resumed job wants no other
        consumer of its old run attached)."""
        if state.get("job") != self.job:
            raise Error("feedmesh: state_dict of job %r loaded into a dataset of job %r" % (state.get("job"), self.job))
        self._close_iterator()
        self._it = None
        self._epoch = state.get("epoch")
        self._resume = state.get("checkpoint")

    def _close_iterator(self):
        if self._it is not None:
            self._it.close()

    def close(self):
        """Stops the iteration and closes the connection."""
        self._close_iterator()
        if self._client is not None:
            self._client.close()
            self._client = None
