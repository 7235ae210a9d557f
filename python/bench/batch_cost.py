"""The Python client's fixed cost per batch, measured on the calling thread.

    PYTHONPATH=python FEEDMESH_LIB=... /usr/bin/python3 python/bench/batch_cost.py --addr 127.0.0.1:7947

Reads a job (by default the text workload of `feedmesh-bench python`:
synthetic text -> tokenize_whitespace -> bucket_by_sequence_length, ~22 KB
batches of 5 tensors) as a training loop that keeps nothing would, and
times with the calling thread's CPU clock (time.thread_time_ns, so waiting
for a batch counts for nothing):

  next_us     it.next(): the fm_next call (the Go side of handing a batch
              over runs on this thread) and building the Batch and its
              numpy views;
  touch_us    taking every tensor of the batch (b[name] for each name);
  release_us  dropping the batch and its arrays (the buffer goes back to the
              client: fm_batch_release, or whatever the package does then).

Every --pause-every batches the loop sleeps --pause seconds so that the
client's prefetch refills and most next() calls find a batch waiting.
Prints one JSON line: medians and means (microseconds) over the measured
batches, and their sum (total_us) per batch. The script uses only the
package's public API, so it measures any version of it.
"""

import argparse
import json
import statistics
import sys
import time
import uuid


def text_spec(count):
    return {
        "source": {"synthetic": {"kind": "text", "count": count, "seed": 3}},
        "ops": [
            {"map": {"fn": "tokenize_whitespace", "args": {"vocab_size": 32000}}},
            {"bucket_by_sequence_length": {"tensor": "tokens", "boundaries": [32, 64, 128, 256, 512],
                                           "batch_sizes": [64, 64, 32, 16, 8, 4]}},
        ],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", required=True, help="a node's QUIC address")
    p.add_argument("--spec", help="a dataset spec file (default: the text workload)")
    p.add_argument("--batches", type=int, default=20000, help="batches measured")
    p.add_argument("--warmup", type=int, default=500, help="batches read before measuring")
    p.add_argument("--pause-every", type=int, default=50)
    p.add_argument("--pause", type=float, default=0.02)
    p.add_argument("--client-options", default='{"transport": "fast", "log_level": "error"}')
    a = p.parse_args()

    import feedmesh

    spec = a.spec or text_spec(1 << 26)
    tt = time.thread_time_ns
    nxt, touch, rel = [], [], []
    with feedmesh.Client(a.addr, **json.loads(a.client_options)) as c, \
            c.distribute(spec, job="batch-cost-" + uuid.uuid4().hex[:8], gc_after=0.2, delivery="at-most-once", workers="all") as it:
        for i in range(a.warmup + a.batches):
            if i % a.pause_every == 0:
                time.sleep(a.pause)
            t0 = tt()
            b = it.next()
            t1 = tt()
            for k in b.keys():
                b[k]
            t2 = tt()
            del b
            t3 = tt()
            if i >= a.warmup:
                nxt.append(t1 - t0)
                touch.append(t2 - t1)
                rel.append(t3 - t2)
    tot = [x + y + z for x, y, z in zip(nxt, touch, rel)]
    out = {"batches": len(tot)}
    for name, xs in (("next_us", nxt), ("touch_us", touch), ("release_us", rel), ("total_us", tot)):
        out[name] = {"median": round(statistics.median(xs) / 1e3, 1), "mean": round(statistics.fmean(xs) / 1e3, 1)}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
