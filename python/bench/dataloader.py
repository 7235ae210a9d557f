"""The DataLoader baseline of `feedmesh-bench python` (workload dataloader).

A PyTorch user's input pipeline today, next to feedmesh's: one pass over a
text file (one example per line) into a training loop, two ways.

--mode dataloader: torch.utils.data.DataLoader over an IterableDataset
  that does the work in Python in the training machine's processes:
  read the lines, tokenize at white space hashing each token (FNV-1a,
  64 bit, mod --vocab-size, as feedmesh's tokenize_whitespace does; the
  token -> id hashes are memoised in a dict, as a vocabulary lookup
  would be), bucket by length (bucket i holds lengths in (b[i-1], b[i]],
  emits a batch when it holds batch_sizes[i] examples, padded with 0 to
  the batch's longest; partial batches at the end in bucket order, as
  feedmesh's bucket_by_sequence_length does). With --num-workers N > 0,
  N worker processes (the default start method) each take every N-th
  line.

--mode feedmesh: feedmesh.torch.FeedmeshDataset over a job of --spec (the
  same file, tokenized and bucketed by the cluster's workers) in a
  DataLoader with num_workers=0, batch_size=None.

Either way the loop receives dicts of torch tensors ("tokens" int32
[batch, longest], "tokens_length" int32 [batch]; feedmesh's batches also
carry the lines' "text") and sums each batch's tokens (a touch of the
data, and a check: padding is 0, so the sum of every token id is the
same whichever way the file was read). Prints one JSON line:

    {"batches": N, "rows": N, "tokens": N, "token_id_sum": N,
     "bytes": N, "seconds": S, "cpu_s": S}

seconds runs from the start of the DataLoader's iteration to its end
(worker processes started, or the job created, within it); cpu_s is this
process's CPU time over the same span plus that of the worker processes
(reaped when the iteration ends); bytes counts the tensors tokens and
tokens_length as the loop receives them (padded).
"""

import argparse
import bisect
import json
import resource
import sys
import time

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = 0xFFFFFFFFFFFFFFFF


def fnv1a(tok):
    h = FNV_OFFSET
    for c in tok:
        h = ((h ^ c) * FNV_PRIME) & MASK64
    return h


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def make_text_dataset(path, vocab, boundaries, batch_sizes):
    import numpy as np
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    class BucketedText(IterableDataset):
        """Lines of path, tokenized and bucketed in Python."""

        def __iter__(self):
            info = get_worker_info()
            nw, wid = (1, 0) if info is None else (info.num_workers, info.id)
            ids_of = {}

            def token_ids(line):
                out = []
                for w in line.split():
                    i = ids_of.get(w)
                    if i is None:
                        i = ids_of[w] = fnv1a(w) % vocab
                    out.append(i)
                return out

            def batch(examples):
                lengths = np.fromiter((len(e) for e in examples), dtype=np.int32, count=len(examples))
                tokens = np.zeros((len(examples), int(lengths.max())), dtype=np.int32)
                for j, e in enumerate(examples):
                    tokens[j, : len(e)] = e
                return {"tokens": torch.from_numpy(tokens), "tokens_length": torch.from_numpy(lengths)}

            buckets = [[] for _ in batch_sizes]
            with open(path, "rb") as f:
                for n, line in enumerate(f):
                    if n % nw != wid:
                        continue
                    ids = token_ids(line)
                    b = bisect.bisect_left(boundaries, len(ids))
                    bk = buckets[b]
                    bk.append(ids)
                    if len(bk) == batch_sizes[b]:
                        yield batch(bk)
                        buckets[b] = []
            for bk in buckets:
                if bk:
                    yield batch(bk)

    return BucketedText()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["dataloader", "feedmesh"], required=True)
    p.add_argument("--file", help="dataloader: the text file, one example per line")
    p.add_argument("--num-workers", type=int, default=0, help="dataloader: DataLoader worker processes")
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--boundaries", default="32,64,128,256,512")
    p.add_argument("--batch-sizes", default="64,64,32,16,8,4")
    p.add_argument("--addr", help="feedmesh: a node's QUIC address")
    p.add_argument("--job", help="feedmesh: job name")
    p.add_argument("--spec", help="feedmesh: the dataset spec (a JSON file)")
    p.add_argument("--client-options", default="{}", help="feedmesh: feedmesh.Client keywords, a JSON object")
    p.add_argument("--gc-after", type=float, help="feedmesh: the job's gc_after, seconds")
    p.add_argument("--offload", default="remote",
                   help="feedmesh: the dataset's offload (remote: the nodes do the work, as the benchmark compares; "
                        "auto: the dataset's default, which here shares the nodes' 2 cores)")
    a = p.parse_args()
    boundaries = [int(x) for x in a.boundaries.split(",")]
    batch_sizes = [int(x) for x in a.batch_sizes.split(",")]
    if len(batch_sizes) != len(boundaries) + 1:
        p.error("--batch-sizes needs one more entry than --boundaries")
    if a.mode == "dataloader" and not a.file:
        p.error("--mode dataloader needs --file")
    if a.mode == "feedmesh" and not (a.addr and a.job and a.spec):
        p.error("--mode feedmesh needs --addr, --job and --spec")

    import torch
    from torch.utils.data import DataLoader

    if a.mode == "dataloader":
        ds = make_text_dataset(a.file, a.vocab_size, boundaries, batch_sizes)
        loader = DataLoader(ds, batch_size=None, num_workers=a.num_workers)
    else:
        from feedmesh.torch import FeedmeshDataset

        ds = FeedmeshDataset(a.addr, a.spec, job=a.job, client_options=json.loads(a.client_options), gc_after=a.gc_after,
                             offload=a.offload)
        loader = DataLoader(ds, batch_size=None, num_workers=0)

    batches = rows = tokens = idsum = nbytes = 0
    cpu0, t0 = cpu_seconds(), time.monotonic()
    it = iter(loader)
    for b in it:
        t, n = b["tokens"], b["tokens_length"]
        batches += 1
        rows += n.shape[0]
        tokens += int(n.sum())
        idsum += int(t.sum())
        nbytes += t.element_size() * t.nelement() + n.element_size() * n.nelement()
    del it  # worker processes, if any, were joined at the end of the iteration
    cpu1, t1 = cpu_seconds(), time.monotonic()
    if a.mode == "feedmesh":
        ds.close()
    out = {"batches": batches, "rows": rows, "tokens": tokens, "token_id_sum": idsum, "bytes": nbytes,
           "seconds": t1 - t0, "cpu_s": cpu1 - cpu0}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
