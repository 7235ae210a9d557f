"""The Python reader of `feedmesh-bench python` (workloads text and raw).

Started by the benchmark as a child process, with PYTHONPATH pointing at
the python directory and FEEDMESH_LIB at the library it built. Reads one
job with feedmesh.Client, as a training loop would (the loop keeps
nothing, so each batch's buffer goes back to the client as the loop moves
on), for --warmup seconds after the first batch, then for --seconds, and
prints one JSON line on stdout: what the window received and the CPU time
this process (Python and the Go runtime's threads) used meanwhile:

    {"batches": N, "bytes": N, "seconds": S, "cpu_s": S}

The Go reader (`feedmesh-bench python --go-reader`) does the same with the
Go client, so both are measured the same way (getrusage(RUSAGE_SELF) over
the window).
"""

import argparse
import json
import resource
import sys
import time


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", required=True, help="a node's QUIC address")
    p.add_argument("--job", required=True, help="job name")
    p.add_argument("--spec", required=True, help="the dataset spec (a JSON file)")
    p.add_argument("--sharding", default="dynamic")
    p.add_argument("--client-options", default="{}", help="feedmesh.Client keywords, a JSON object")
    p.add_argument("--gc-after", type=float, help="the job's gc_after, seconds")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds read after the first batch, before the window")
    p.add_argument("--seconds", type=float, default=3.0, help="the measured window")
    a = p.parse_args()
    if not (a.seconds > 0 and a.warmup >= 0):
        p.error("--seconds must be > 0 and --warmup >= 0")

    import feedmesh  # after parsing: a usage error needs neither numpy nor the library

    opts = json.loads(a.client_options)
    with feedmesh.Client(a.addr, **opts) as client, client.distribute(a.spec, job=a.job, sharding=a.sharding, gc_after=a.gc_after, workers="all",
                                                                    offload="remote") as it:  # as the Go reader: the nodes prepare everything
        next(it)
        t = time.monotonic()
        for _ in it:
            if time.monotonic() - t >= a.warmup:
                break
        st0, cpu0, t0 = it.stats(), cpu_seconds(), time.monotonic()
        end = t0 + a.seconds
        for _ in it:
            if time.monotonic() >= end:
                break
        else:
            raise SystemExit("read_job: the job ended before the window did: give it more data")
        st1, cpu1, t1 = it.stats(), cpu_seconds(), time.monotonic()
        out = {
            "batches": st1["batches"] - st0["batches"],
            "bytes": st1["bytes"] - st0["bytes"],
            "seconds": t1 - t0,
            "cpu_s": cpu1 - cpu0,
        }
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
