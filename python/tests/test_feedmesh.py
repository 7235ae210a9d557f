"""Tests of the feedmesh Python package against a real cluster.

Run by cmd/libfeedmesh's TestPython (go test ./cmd/libfeedmesh), which
builds the library, starts an in-process cluster and sets:

  FEEDMESH_LIB              the library
  FEEDMESH_TEST_ADDR        a node's QUIC address
  FEEDMESH_STRESS_BATCHES   batches of the stress test (10000; fewer with -short)
  FEEDMESH_REQUIRE_PYTHON   1: a missing torch fails instead of skipping
"""

import _thread
import atexit
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import unittest
import uuid

import numpy as np

import feedmesh

ADDR = os.environ.get("FEEDMESH_TEST_ADDR", "")
REQUIRE = os.environ.get("FEEDMESH_REQUIRE_PYTHON") == "1"
# The test cluster runs the fast preset: so does the client's transport.
CLIENT_OPTS = {"transport": "fast", "heartbeat_interval": 0.1, "log_level": "error"}

try:
    import torch
    import torch.utils.data

    import feedmesh.torch as fmtorch

    TORCH = None
except ImportError as e:  # reported by the torch tests
    torch = None
    TORCH = "torch is not installed (%s): apt-get install python3-torch" % e


def setUpModule():
    if not ADDR:
        raise unittest.SkipTest("FEEDMESH_TEST_ADDR is not set: run these tests with go test ./cmd/libfeedmesh")


def need_torch(test):
    if TORCH and REQUIRE:
        raise AssertionError(TORCH + " (FEEDMESH_REQUIRE_PYTHON=1)")
    if TORCH:
        raise unittest.SkipTest(TORCH)


def job_name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def range_spec(n, batch, split=500, ops=()):
    return {"source": {"range": {"stop": n, "split_size": split}}, "ops": list(ops) + [{"batch": {"size": batch}}]}


# A job whose first batch takes ~100 s: for waiting.
SLOW_SPEC = {"source": {"range": {"stop": 1000, "split_size": 1000}},
             "ops": [{"cost": {"sleep_us": 100000}}, {"batch": {"size": 1000}}]}

TEXT_SPEC = {"source": {"synthetic": {"kind": "text", "count": 400, "seed": 3, "split_size": 50, "max_words": 200}},
             "ops": [{"map": {"fn": "tokenize_whitespace", "args": {"vocab_size": 1000}}},
                     {"bucket_by_sequence_length": {"tensor": "tokens", "boundaries": [16, 32, 64], "batch_sizes": [8, 4, 2, 1]}}]}


def client():
    return feedmesh.Client(ADDR, **CLIENT_OPTS)


def read_values(it, key="value", limit=None):
    """Copies of key's values of every batch (up to limit batches)."""
    out = []
    for b in it:
        out.append(np.array(b[key]))
        if limit is not None and len(out) == limit:
            break
    return np.concatenate(out) if out else np.array([], dtype=np.int64)


def assert_once(tc, values, n):
    values = np.sort(np.asarray(values))
    tc.assertEqual(len(values), n, "elements received")
    tc.assertTrue((values == np.arange(n)).all(), "every element of range(%d) once" % n)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class ReadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def test_range_every_element_once(self):
        n = 20000
        with self.c.distribute(range_spec(n, 64), job=job_name("range")) as it:
            b = next(it)
            self.assertIsInstance(b, dict)
            self.assertEqual(b["value"].dtype, np.int64)
            self.assertEqual(b["value"].shape, (64,))
            self.assertEqual(b.rows, 64)
            vals = np.concatenate([np.array(b["value"]), read_values(it)])
            assert_once(self, vals, n)
            st = it.stats()
            self.assertEqual(st["elements"], n)
            # Each worker's last batch may be partial.
            self.assertGreaterEqual(st["batches"], -(-n // 64))
            self.assertEqual(sum(w["batches"] for w in st["workers"].values()), st["batches"])
            self.assertGreater(st["seconds"], 0)
            self.assertEqual(sum(w["rows"] for w in st["workers"].values()), n)
            self.assertEqual(sum(w["elements"] for w in st["workers"].values()), n)
            self.assertEqual(sum(w["cut_elements"] for w in st["workers"].values()), 0)
            self.assertEqual(st["delivery"], "exactly-once")
            with self.assertRaises(StopIteration):
                next(it)

    def test_stall_and_autoscale(self):
        n = 3000
        with self.c.distribute(range_spec(n, 32), job=job_name("auto"), autoscale=True) as it:
            vals = read_values(it)
            assert_once(self, vals, n)
            st = it.stats()
            self.assertGreaterEqual(st["stall_fraction"], 0)
            self.assertLessEqual(st["stall_fraction"], 1)
            self.assertGreater(st["batch_time_seconds"], 0)
        with self.assertRaises(feedmesh.InvalidArgument) as cm:
            self.c.distribute(range_spec(10, 5), job=job_name("auto-off"), sharding="off", autoscale=True)
        self.assertIn("autoscale", str(cm.exception))

    def test_workers(self):
        # A fixed count, as an int; "auto" where the job cannot autoscale
        # says what it can take; a count that is not an int is refused
        # before anything is sent.
        n = 200
        with self.c.distribute(range_spec(n, 20), job=job_name("two"), workers=2) as it:
            assert_once(self, read_values(it), n)
        with self.assertRaises(feedmesh.InvalidArgument) as cm:
            self.c.distribute(range_spec(10, 5), job=job_name("auto-share"), share=True, workers="auto")
        self.assertIn("workers all or a fixed count", str(cm.exception))
        with self.assertRaises(feedmesh.InvalidArgument) as cm:
            self.c.distribute(range_spec(10, 5), job=job_name("many"), workers="many")
        self.assertIn("want auto", str(cm.exception))
        with self.assertRaises(TypeError):
            self.c.distribute(range_spec(10, 5), job=job_name("half"), workers=1.5)

    def test_zero_copy_views(self):
        with self.c.distribute(range_spec(256, 64), job=job_name("view")) as it:
            b = next(it)
            a = b["value"]
            self.assertFalse(a.flags.owndata, "a view of the batch's buffer, not a copy")
            self.assertTrue(a.flags.writeable and a.flags.aligned)
            self.assertIs(b["value"], a)

    def test_dtypes_and_variable_length(self):
        spec = range_spec(100, 8, ops=[{"map": {"fn": "cast", "args": {"tensor": "value", "dtype": "float32"}}}])
        with self.c.distribute(spec, job=job_name("f32")) as it:
            vals = read_values(it)
            self.assertEqual(vals.dtype, np.float32)
            self.assertEqual(sorted(vals.tolist()), list(map(float, range(100))))
        with self.c.distribute(TEXT_SPEC, job=job_name("text")) as it:
            ids = []
            for b in it:
                toks, lens, text = b["tokens"], b["tokens_length"], b["text"]
                self.assertEqual(toks.dtype, np.int32)
                self.assertEqual(toks.ndim, 2)
                self.assertEqual(toks.shape[1], lens.max())
                self.assertIsInstance(text, feedmesh.BytesTensor)
                self.assertEqual(len(text.tolist()), toks.shape[0])
                for i, t in enumerate(text.tolist()):
                    self.assertEqual(len(t.split()), lens[i])  # one token per word
                    self.assertEqual(text.entry(i), t)
                ids.extend(b["id"].tolist())
            self.assertEqual(sorted(ids), list(range(400)))

    def test_spec_forms(self):
        n = 50
        spec = range_spec(n, 10)
        import json

        yaml = "source:\n  range: {stop: %d, split_size: 500}\nops:\n  - batch: {size: 10}\n" % n
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "spec.yaml")
            with open(path, "w") as f:
                f.write(yaml)
            for i, form in enumerate([spec, json.dumps(spec), yaml, path]):
                with self.c.distribute(form, job=job_name("form%d" % i)) as it:
                    assert_once(self, read_values(it), n)

    def test_coordinated_two_ranks(self):
        job = job_name("coord")
        out = [None, None]

        def rank(i):
            try:
                with self.c.distribute(TEXT_SPEC, job=job, num_consumers=2, consumer_index=i, pad_final_round=True) as it:
                    out[i] = [(b.round, b.bucket, b["id"].tolist()) for b in it]
            except Exception as e:
                out[i] = e

        ts = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        for i in range(2):
            self.assertIsInstance(out[i], list, "rank %d: %r" % (i, out[i]))
        r0, r1 = out
        self.assertEqual([r for r, _, _ in r0], [r for r, _, _ in r1], "both ranks read the same rounds")
        self.assertEqual([b for _, b, _ in r0], [b for _, b, _ in r1], "in each round, the same bucket")
        ids = [x for rnk in out for _, _, batch in rnk for x in batch]
        self.assertEqual(sorted(ids), list(range(400)), "every id once across the ranks")

    def test_sharing(self):
        n = 4000
        spec = range_spec(n, 50)
        res = {}

        def read(job):
            try:
                with self.c.distribute(spec, job=job, share=True) as it:
                    res[job] = (read_values(it), it.stats())
            except Exception as e:
                res[job] = e

        jobs = [job_name("share-a"), job_name("share-b")]
        ts = [threading.Thread(target=read, args=(j,)) for j in jobs]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        for j in jobs:
            self.assertIsInstance(res[j], tuple, "job %s: %r" % (j, res[j]))
            vals, st = res[j]
            assert_once(self, vals, n)  # each sharing job reads every batch
            self.assertEqual(st["delivery"], "at-most-once")

    def test_attach(self):
        n = 2000
        job = job_name("attach")
        # Slow enough (1 ms an element) that the job is still running when
        # the second consumer attaches.
        spec = range_spec(n, 20, split=100, ops=[{"cost": {"sleep_us": 1000}}])
        with self.c.distribute(spec, job=job) as it1:
            first = read_values(it1, limit=5)
            with self.c.attach(job) as it2:
                res = {}

                def read(name, it):
                    try:
                        res[name] = read_values(it)
                    except Exception as e:
                        res[name] = e

                ts = [threading.Thread(target=read, args=a) for a in (("it1", it1), ("it2", it2))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(60)
        for k in ("it1", "it2"):
            self.assertIsInstance(res[k], np.ndarray, "%s: %r" % (k, res[k]))
        self.assertGreater(len(res["it2"]), 0, "the attached iterator got batches too")
        assert_once(self, np.concatenate([first, res["it1"], res["it2"]]), n)


    def test_few_splits_warning(self):
        # One split, three workers: two idle. stats() says so (it said
        # nothing before), and the client's log warns once.
        with self.assertLogs("feedmesh", level="WARNING") as logs, \
                feedmesh.Client(ADDR, **dict(CLIENT_OPTS, log_level="warn")) as c, \
                c.distribute(range_spec(300, 30, split=300), job=job_name("few"), workers="all") as it:
            assert_once(self, read_values(it), 300)
            st = it.stats()
        self.assertEqual(len(st["warnings"]), 1, st.get("warnings"))
        self.assertIn("1 split(s)", st["warnings"][0])
        self.assertIn("split_bytes", st["warnings"][0])
        self.assertTrue(any("1 split(s)" in m for m in logs.output), logs.output)

    def test_order_deterministic(self):
        # Two jobs of one spec and seed deliver one sequence (each element
        # once), another seed another; a checkpoint resumes it exactly,
        # and the audit of each whole run matches the layout's.
        n = 2000
        spec = range_spec(n, 16, ops=[{"cost": {"sleep_us": 1}}])
        spec.update({"order_block": 16, "order_window": 4})
        opts = dict(order="deterministic", seed=1234, reorder_batches=512)
        with self.c.distribute(spec, job=job_name("det"), **opts) as it:
            first = read_values(it)
            audit = it.audit()
            self.assertEqual(it.stats()["reorder"]["bound"], 512)
        assert_once(self, first, n)
        self.assertEqual(len(audit), 1)
        self.assertTrue(audit[0]["complete"] and audit[0]["match"], audit)
        self.assertEqual(audit[0]["elements"], n)
        job = job_name("det")
        with self.c.distribute(spec, job=job, **opts) as it:
            head = read_values(it, limit=30)
            ck = it.checkpoint()
        with self.c.distribute(spec, job=job, resume=ck, **opts) as it:
            tail = read_values(it)
            self.assertTrue(it.audit()[0]["match"])
        np.testing.assert_array_equal(np.concatenate([head, tail]), first)
        with self.c.distribute(spec, job=job_name("det"), skip_batches=[(5, 10)], **opts) as it:
            skipped = read_values(it)
            self.assertEqual(it.stats()["reorder"]["skipped"], 5)
        np.testing.assert_array_equal(skipped, np.concatenate([first[:5 * 16], first[10 * 16:]]))
        with self.c.distribute(spec, job=job_name("det"), order="deterministic", seed=99) as it:
            other = read_values(it)
        assert_once(self, other, n)
        self.assertFalse(np.array_equal(other, first))
        with self.c.distribute(range_spec(n, 16), job=job_name("any")) as it:
            read_values(it)
            self.assertIsNone(it.audit())

    def test_offload_boundary(self):
        # A partial offload: the nodes run the cost op, this process the
        # cast and the batch; every element once, and the stats say so.
        n = 3000
        spec = range_spec(n, 32, split=100, ops=[{"cost": {"sleep_us": 1}},
                                                 {"map": {"fn": "cast", "args": {"tensor": "value", "dtype": "int64"}}}])
        with self.c.distribute(spec, job=job_name("cut"), offload_boundary=1) as it:
            assert_once(self, read_values(it), n)
            st = it.stats()
            off = st["offload"]
            self.assertEqual(off["cut"], 1)
            self.assertIn("offload_boundary 1", off["reason"])
            # The nodes shipped single elements: each worker's count them
            # (all cut), none as its batches; this process made the batches.
            ws = st["workers"].values()
            self.assertEqual(sum(w["elements"] for w in ws), n)
            self.assertEqual(sum(w["cut_elements"] for w in ws), n)
            self.assertEqual(sum(w["batches"] for w in ws), 0)
            self.assertGreaterEqual(st["batches"], n // 32)
        with self.assertRaisesRegex(feedmesh.InvalidArgument, "a cut leaves at least one"):
            self.c.distribute(spec, job=job_name("cut-bad"), offload_boundary=3)


class CheckpointTest(unittest.TestCase):
    def test_checkpoint_resume_exactly_once(self):
        n = 3000
        spec, job = range_spec(n, 30, split=100), job_name("ck")
        with client() as c:
            it = c.distribute(spec, job=job)
            before = read_values(it, limit=25)
            ck = it.checkpoint()
            self.assertIsInstance(ck, bytes)
            it.close()
            ck = it.checkpoint()  # as of the close: the same batches
            with c.distribute(spec, job=job, resume=ck) as it2:
                after = read_values(it2)
        assert_once(self, np.concatenate([before, after]), n)

    def test_resume_fences_the_old_consumer(self):
        # A resume from a checkpoint of the job takes over at once: the
        # consumer that took it, still attached (it raised JobInUse for its
        # lease before), is fenced, and says so at its next call.
        n = 3000
        spec, job = range_spec(n, 30, split=100, ops=[{"cost": {"sleep_us": 200}}]), job_name("fence")
        with client() as c:
            it = c.distribute(spec, job=job)
            before = read_values(it, limit=5)
            ck = it.checkpoint()
            with c.distribute(spec, job=job, resume=ck) as it2:
                after = read_values(it2)
            with self.assertRaisesRegex(feedmesh.Error, "fenced"):
                while True:
                    next(it)
            it.close()
        assert_once(self, np.concatenate([before, after]), n)

    def test_finished_job_raises(self):
        # Reading a job that has run to its end again raises JobFinished
        # (it delivered nothing, silently, before); so does attach.
        spec, job = range_spec(300, 30, split=100), job_name("done")
        with client() as c:
            with c.distribute(spec, job=job) as it:
                assert_once(self, read_values(it), 300)
            with self.assertRaisesRegex(feedmesh.JobFinished, "another job name") as cm:
                c.distribute(spec, job=job)
            self.assertEqual(type(cm.exception).__module__, "feedmesh")
            with self.assertRaises(feedmesh.JobFinished):
                c.attach(job)
            self.assertEqual(c.job(job)["state"], "finished")
            self.assertFalse(c.job(job)["consumers"])

    def test_bad_checkpoint(self):
        with client() as c:
            with self.assertRaises(feedmesh.BadCheckpoint):
                c.distribute(range_spec(100, 10), job=job_name("badck"), resume=b"not a checkpoint")
            with c.distribute(range_spec(100, 10), job=job_name("offck"), sharding="off") as it:
                next(it)
                with self.assertRaises(feedmesh.Error):
                    it.checkpoint()


_TRAINER = """
import sys, time, numpy as np, feedmesh
addr, job, spec, ckpath, opts = sys.argv[1], sys.argv[2], eval(sys.argv[3]), sys.argv[4], eval(sys.argv[5])
c = feedmesh.Client(addr, **opts)
it = c.distribute(spec, job=job)
vals = []
for b in it:
    vals.append(np.array(b["value"]))
    if len(vals) == 20:
        break
np.save(ckpath + ".values.npy", np.concatenate(vals))
with open(ckpath + ".tmp", "wb") as f:
    f.write(it.checkpoint())
import os
os.rename(ckpath + ".tmp", ckpath)
print("checkpointed", flush=True)
time.sleep(600)  # training on, until SIGKILLed
"""


class PreemptionTest(unittest.TestCase):
    def test_resume_after_sigkill(self):
        # Issue 38 item 3: a trainer process reads, saves its checkpoint,
        # and is SIGKILLed (preempted); its consumer stays attached until
        # its lease expires (consumer_ttl, 30 s). A new process resumes
        # from the checkpoint at once: it failed with JobInUse for those
        # 30 s before; the checkpoint now fences the dead consumer. The
        # time from the SIGKILL to the resumed reader's first batch is
        # printed; the two read every element once.
        import subprocess

        n = 3000
        spec, job = range_spec(n, 30, split=100), job_name("preempt")
        with tempfile.TemporaryDirectory() as d:
            ckpath = os.path.join(d, "ck")
            p = subprocess.Popen([sys.executable, "-c", _TRAINER, ADDR, job, repr(spec), ckpath, repr(CLIENT_OPTS)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                line = p.stdout.readline().decode()
                self.assertEqual(line.strip(), "checkpointed", p.stderr.read().decode() if not line else line)
                with open(ckpath, "rb") as f:
                    ck = f.read()
                before = np.load(ckpath + ".values.npy")
            finally:
                p.kill()
                killed = time.monotonic()
                p.wait()
                p.stdout.close()
                p.stderr.close()
            with client() as c:
                t0 = time.monotonic()
                it = c.distribute(spec, job=job, resume=ck)
                first = np.array(next(it)["value"])
                took, resume_took = time.monotonic() - killed, time.monotonic() - t0
                rest = read_values(it)
                it.close()
        print("preemption: SIGKILL to the resumed reader's first batch %.3f s (resume call to first batch %.3f s)"
              % (took, resume_took), file=sys.stderr)
        assert_once(self, np.concatenate([before, first, rest]), n)
        self.assertLess(took, 10, "the resume waited for the dead consumer's lease")


class ProgressTest(unittest.TestCase):
    def test_progress_line(self):
        import io

        out = io.StringIO()
        with client() as c, c.distribute(range_spec(300, 30, split=100), job=job_name("prog")) as it:
            vals = [np.array(b["value"]) for b in feedmesh.progress(it, every=0, file=out)]
        assert_once(self, np.concatenate(vals), 300)
        text = out.getvalue()
        self.assertTrue(text.startswith("\r") and text.endswith("\n"), repr(text[:80]))
        last = text.rstrip("\n").split("\r")[-1]
        self.assertIn("job prog-", last)
        self.assertIn("%d batches" % len(vals), last)  # 10 to 12: a partial batch per split its workers end
        self.assertIn("300 elements", last)
        out = io.StringIO()
        self.assertEqual(list(feedmesh.progress(range(5), every=0, file=out, total=5)), list(range(5)))
        self.assertIn("5 items", out.getvalue())
        self.assertIn("100%", out.getvalue())


def _jax_missing():
    try:
        import jax  # noqa: F401
    except ImportError as e:
        return "JAX is not installed (%s): pip install jax to run python/examples/jax_train.py here" % e
    return None


class JaxTest(unittest.TestCase):
    def test_example_runs(self):
        # python/examples/jax_train.py, when JAX is importable.
        why = _jax_missing()
        if why:
            self.skipTest(why)
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
        try:
            import jax_train
        finally:
            sys.path.pop(0)
        loss = jax_train.main(ADDR, job_name("jax"), CLIENT_OPTS)
        self.assertLess(loss, 0.05)

    def test_multihost_mapping_and_prefetch(self):
        # feedmesh.jax with a stand-in for jax (runs without JAX): host 1
        # of 2 reads as consumer_index 1 of num_consumers 2 (coordinated),
        # or as one of 2 consumers of a DYNAMIC job (coordinated=False);
        # prefetch_to_device keeps `size` batches put ahead, in order, and
        # leaves bytes tensors on the host.
        import types
        from unittest import mock

        put = []
        fake = types.SimpleNamespace(process_count=lambda: 2, process_index=lambda: 1,
                                     device_put=lambda v, d=None: put.append(v) or ("dev", v))
        with mock.patch.dict(sys.modules, {"jax": fake}):
            import feedmesh.jax as fmjax

            calls = []
            c = types.SimpleNamespace(distribute=lambda spec, job, **kw: calls.append(kw) or "it")
            self.assertEqual(fmjax.distribute(c, "s.yaml", "j", epochs=2), "it")
            self.assertEqual(calls[-1], {"epochs": 2, "num_consumers": 2, "consumer_index": 1})
            fmjax.distribute(c, "s.yaml", "j", coordinated=False)
            self.assertEqual(calls[-1], {"coordinated": False, "num_consumers": 2})
            batches = [{"value": np.arange(i, i + 2), "text": feedmesh.BytesTensor(np.zeros(0, np.uint8), np.zeros(1, np.int64), ())}
                       for i in range(5)]
            seen = []

            def source():
                for b in batches:
                    seen.append(len(put))
                    yield b

            out = list(fmjax.prefetch_to_device(source(), size=2))
        self.assertEqual([o["value"][1][0] for o in out], [0, 1, 2, 3, 4])
        self.assertIsInstance(out[0]["text"], feedmesh.BytesTensor)
        self.assertEqual(seen[:3], [0, 1, 2], "two batches put ahead before the first is yielded")


class VersionTest(unittest.TestCase):
    def test_library_is_package_version(self):
        # One checkout: the library's fm_version and the package's
        # __version__ both come from internal/version/VERSION.
        self.assertEqual(feedmesh.library_version(), feedmesh.__version__)


class TypingTest(unittest.TestCase):
    def test_public_api_is_typed(self):
        # py.typed ships with the package, and every public function and
        # method (those of feedmesh.__all__, feedmesh.torch.FeedmeshDataset,
        # feedmesh.jax) annotates its parameters and return, with hints that
        # resolve (they are strings at run time: from __future__ import
        # annotations, typing imported only under TYPE_CHECKING).
        import inspect
        import typing

        import feedmesh.jax
        import feedmesh.torch

        pkg = os.path.dirname(os.path.abspath(feedmesh.__file__))
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")))
        names = dict(vars(typing))
        names["typing"] = typing
        names["SpecLike"] = typing.Any
        names["PathLike"] = typing.Any
        funcs = []
        for name in feedmesh.__all__:
            obj = getattr(feedmesh, name)
            if inspect.isfunction(obj):
                funcs.append(("feedmesh." + name, obj))
            elif isinstance(obj, type) and not issubclass(obj, BaseException):
                for m, f in vars(obj).items():
                    if inspect.isfunction(f) and (not m.startswith("_") or m in ("__init__", "__iter__", "__len__")):
                        funcs.append(("feedmesh.%s.%s" % (name, m), f))
        for m, f in vars(feedmesh.torch.FeedmeshDataset).items():
            if inspect.isfunction(f) and not m.startswith("_"):
                funcs.append(("FeedmeshDataset." + m, f))
        for m in feedmesh.jax.__all__:
            funcs.append(("feedmesh.jax." + m, getattr(feedmesh.jax, m)))
        self.assertGreater(len(funcs), 20)
        for what, f in funcs:
            sig = inspect.signature(f)
            self.assertIsNot(sig.return_annotation, inspect.Signature.empty, what + ": no return annotation")
            for p in sig.parameters.values():
                if p.name != "self":
                    self.assertIsNot(p.annotation, inspect.Parameter.empty, "%s: %s has no annotation" % (what, p.name))
            ns = dict(names)
            ns.update(vars(inspect.getmodule(f)))
            typing.get_type_hints(f, globalns=ns)  # raises if a hint does not resolve


class BadInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def test_wrong_address(self):
        t0 = time.monotonic()
        with self.assertRaises(feedmesh.Unavailable) as cm:
            feedmesh.Client("127.0.0.1:1", dial_timeout=3, **CLIENT_OPTS)
        self.assertIn("127.0.0.1:1", str(cm.exception))
        self.assertLess(time.monotonic() - t0, 10)
        with self.assertRaises(feedmesh.InvalidArgument):
            feedmesh.Client("no-port-here", **CLIENT_OPTS)
        with self.assertRaises(feedmesh.InvalidArgument):
            feedmesh.Client(ADDR, transport="warp", log_level="error")
        with self.assertRaises(ValueError):
            feedmesh.Client(ADDR, unavailable_timeout=-1, **CLIENT_OPTS)
        feedmesh.Client(ADDR, unavailable_timeout=None, **CLIENT_OPTS).close()  # for ever

    def test_wrong_address_prints_no_go_log(self):
        # With the default log level, a wrong address raises Unavailable,
        # named feedmesh.Unavailable, and prints nothing else: the Go
        # client's records go to Python's logging, and a node that did not
        # answer with no other to try is the error's to say (a logfmt
        # "level=WARN" line was printed before).
        import subprocess

        code = (
            "import feedmesh\n"
            "try:\n"
            "    feedmesh.Client('127.0.0.1:1', dial_timeout=2, transport='fast')\n"
            "except feedmesh.Unavailable as e:\n"
            "    print(type(e).__module__ + '.' + type(e).__name__)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
        self.assertEqual(r.stdout.decode().strip(), "feedmesh.Unavailable", r.stderr.decode())
        self.assertEqual(r.stderr.decode(), "", "stderr of a Client of a wrong address")

    def test_log_level_off_keeps_go_logs_quiet(self):
        # log_level "off": the Go client's records (here the few-splits
        # warning, which test_few_splits_warning sees at the default
        # "warn") do not reach Python's logging.
        import logging

        records = []
        h = logging.Handler()
        h.emit = records.append
        log = logging.getLogger("feedmesh")
        log.addHandler(h)
        try:
            with feedmesh.Client(ADDR, **dict(CLIENT_OPTS, log_level="off")) as c, \
                    c.distribute(range_spec(300, 30, split=300), job=job_name("quiet"), workers="all") as it:
                read_values(it)
                self.assertTrue(it.stats()["warnings"])
        finally:
            log.removeHandler(h)
        self.assertEqual([r.getMessage() for r in records], [])

    def test_exception_names_and_error_table(self):
        # Every exception is feedmesh.X; the error table of
        # docs/python/errors.md names each, with the standard bases it says
        # ("also ValueError"), and what a misspelt keyword raises is what
        # the table says: TypeError.
        import builtins
        import re

        for name in feedmesh.__all__:
            obj = getattr(feedmesh, name)
            if isinstance(obj, type):
                self.assertEqual(obj.__module__, "feedmesh", name)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        page = os.path.join(root, "docs", "python", "errors.md")
        with open(page, encoding="utf-8") as f:
            text = f.read()
        rows = []
        i = text.find("| exception | when |")
        self.assertGreaterEqual(i, 0, "no error table (| exception | when |) in " + page)
        for line in text[i:].splitlines()[2:]:
            if not line.startswith("|"):
                break
            rows.append(line)
        self.assertTrue(rows, "the error table of %s has no rows" % page)
        named = set()
        for row in rows:
            cell = row.split("|")[1]
            m = re.match(r"\s*`(\w+)`(?: \(also `(\w+)`(?: and `(\w+)`)?\))?", cell)
            self.assertIsNotNone(m, row)
            name, bases = m.group(1), [b for b in m.group(2, 3) if b]
            named.add(name)
            cls = getattr(feedmesh, name, None) or getattr(builtins, name, None)
            self.assertTrue(isinstance(cls, type) and issubclass(cls, BaseException), row)
            for b in bases:
                self.assertTrue(issubclass(cls, getattr(builtins, b)), "%s is not a %s" % (name, b))
        for name in feedmesh.__all__:
            obj = getattr(feedmesh, name)
            if isinstance(obj, type) and issubclass(obj, feedmesh.Error):
                self.assertIn(name, named, "docs/python/errors.md's error table lacks feedmesh.%s" % name)
        self.assertIn("TypeError", named)
        with self.assertRaises(TypeError):
            self.c.distribute(range_spec(10, 5), job=job_name("bad"), shardng="dynamic")
        with self.assertRaises(TypeError):
            feedmesh.Client(ADDR, windw=4)

    def test_invalid_spec(self):
        with self.assertRaises(feedmesh.InvalidSpec) as cm:
            self.c.distribute("source:\n  range: {stop: 10, bogus: 1}\n", job=job_name("bad"))
        self.assertIn("bogus", str(cm.exception))
        with self.assertRaises(feedmesh.InvalidSpec):
            self.c.distribute("no/such/spec.yaml", job=job_name("bad"))
        # Under the nodes' data root (their working directory, in loopback
        # dev mode), a glob that matches nothing is an invalid spec; outside
        # it, the nodes refuse to look, whether the files exist or not.
        with self.assertRaises(feedmesh.InvalidSpec) as cm:
            self.c.distribute({"source": {"files": {"paths": ["no/such/*.txt"], "format": "lines"}}}, job=job_name("bad"))
        self.assertIn("matches no files", str(cm.exception))
        for path in ("/no/such/*.txt", "/etc/passwd"):
            with self.assertRaises(feedmesh.PermissionDenied) as cm:
                self.c.distribute({"source": {"files": {"paths": [path], "format": "lines"}}}, job=job_name("bad"))
            self.assertIn('"%s": not allowed' % path, str(cm.exception))
            self.assertIsInstance(cm.exception, PermissionError)
        with self.assertRaises(feedmesh.InvalidArgument):
            self.c.distribute(range_spec(10, 5), job=job_name("bad"), sharding="sideways")
        with self.assertRaises(feedmesh.InvalidArgument) as cm:
            self.c.distribute(range_spec(10, 5), job=job_name("bad"), autoscale_threshold=1.5)
        self.assertIn("autoscale_threshold", str(cm.exception))
        with self.assertRaises(feedmesh.InvalidArgument) as cm:
            self.c.distribute(range_spec(10, 5), job=job_name("bad"), workers="all", autoscale_pause=3)
        self.assertIn("workers auto", str(cm.exception))
        with self.assertRaises(TypeError):
            self.c.distribute(42, job=job_name("bad"))
        job = job_name("mismatch")
        with self.c.distribute(range_spec(10, 5), job=job, epochs=1):
            with self.assertRaises(feedmesh.InvalidArgument):  # same name, other options
                self.c.distribute(range_spec(10, 5), job=job, epochs=2)

    def test_not_found(self):
        with self.assertRaises(feedmesh.NotFound):
            self.c.attach(job_name("nobody"))

    def test_closed(self):
        it = self.c.distribute(range_spec(100, 10), job=job_name("closed"))
        it.close()
        it.close()  # again: nothing
        with self.assertRaises(feedmesh.Closed):
            next(it)
        self.assertIn("batches", it.stats())  # as of the close, as checkpoint()
        c = client()
        it = c.distribute(range_spec(100, 10), job=job_name("closed2"))
        c.close()
        with self.assertRaises(feedmesh.Closed):
            c.distribute(range_spec(100, 10), job=job_name("closed3"))
        with self.assertRaises(feedmesh.Closed):
            next(it)  # the client closed its iterators

    def test_batch_after_release(self):
        gc.collect()
        base = feedmesh.live_batches()
        with self.c.distribute(range_spec(100, 10), job=job_name("rel")) as it:
            b = next(it)
            a = b["value"]
            want = a.copy()
            b.release()
            b.release()  # again: nothing
            self.assertTrue(b.released)
            with self.assertRaises(feedmesh.Closed):
                b["value"]
            with self.assertRaises(feedmesh.Closed):
                list(b.items())
            # An array taken before the release keeps the buffer alive.
            self.assertEqual(feedmesh.live_batches(), base + 1)
            self.assertTrue((a == want).all())
            del a
            self.assertEqual(feedmesh.live_batches(), base)
            # Arrays outlive the iterator and the batch object.
            b2 = next(it)
            v = b2["value"]
            del b2
        self.assertEqual(len(v), 10)
        self.assertEqual(feedmesh.live_batches(), base + 1)
        del v
        self.assertEqual(feedmesh.live_batches(), base)

    def test_pickle_batch(self):
        with self.c.distribute(range_spec(20, 10), job=job_name("pickle")) as it:
            b = next(it)
            d = pickle.loads(pickle.dumps(b))
            self.assertEqual(type(d), dict)
            self.assertTrue((d["value"] == b["value"]).all())


    def test_batch_of_an_interrupted_call(self):
        # A KeyboardInterrupt raised as fm_next_meta returns a batch leaves
        # it in the iterator's slot: the next next() returns it, close()
        # frees it.
        import ctypes

        from feedmesh import _lib

        gc.collect()
        base = feedmesh.live_batches()

        def raw_next(it):  # what next() does, up to the interrupt
            err = ctypes.c_void_p()
            rc = _lib.lib().fm_next_meta(it._handle, 5000, it._meta_addr, len(it._meta), ctypes.byref(err))
            self.assertEqual(rc, _lib.OK)
            self.assertNotEqual(it._meta[0], 0)

        with self.c.distribute(range_spec(100, 10, split=100), job=job_name("pending"), max_workers=1) as it:
            raw_next(it)
            self.assertEqual(feedmesh.live_batches(), base + 1)
            vals = read_values(it)
            assert_once(self, vals, 100)  # the pending batch came first, then the rest
            self.assertEqual(feedmesh.live_batches(), base)
        it = self.c.distribute(range_spec(100, 10), job=job_name("pending2"))
        raw_next(it)
        it.close()
        self.assertEqual(feedmesh.live_batches(), base)


    def test_handle_of_another_kind(self):
        # An iterator's handle given to fm_batch_release or fm_client_close
        # (a caller's mix-up) releases and closes nothing: the iterator
        # reads on. (The library used to unregister it.)
        import ctypes

        from feedmesh import _lib

        with self.c.distribute(range_spec(100, 10), job=job_name("kind")) as it:
            next(it)
            err = ctypes.c_void_p()
            self.assertEqual(_lib.lib().fm_batch_release(it._handle), 16)  # FM_ERR_CLOSED
            self.assertEqual(_lib.lib().fm_client_close(it._handle, ctypes.byref(err)), _lib.OK)
            self.assertEqual(sum(len(b["value"]) for b in it), 90)

    def test_record_buffer_grows(self):
        # A batch whose record does not fit the iterator's buffer waits in
        # the library (FM_MORE) while the buffer grows: nothing is lost.
        import ctypes

        gc.collect()
        base = feedmesh.live_batches()
        spec = range_spec(200, 10, ops=[{"map": {"fn": "cast", "args": {"tensor": "value", "dtype": "float32"}}}])
        with self.c.distribute(TEXT_SPEC, job=job_name("grow")) as it:
            it._meta = (ctypes.c_int64 * 10)()  # the header alone
            it._meta_addr = ctypes.addressof(it._meta)
            ids = []
            for b in it:
                ids.extend(b["id"].tolist())
                self.assertEqual(b["tokens"].shape[1], b["tokens_length"].max())
            self.assertEqual(sorted(ids), list(range(400)))
            self.assertGreater(len(it._meta), 10)
            del b
        with self.c.distribute(spec, job=job_name("grow2")) as it:
            it._meta = (ctypes.c_int64 * 10)()
            it._meta_addr = ctypes.addressof(it._meta)
            self.assertEqual(sorted(read_values(it).tolist()), list(map(float, range(200))))
        gc.collect()
        self.assertEqual(feedmesh.live_batches(), base)

    def test_batch_fields(self):
        with self.c.distribute(TEXT_SPEC, job=job_name("fields")) as it:
            seqs = {}
            for b in it:
                self.assertIsInstance(b.worker, str)
                self.assertTrue(b.worker)
                self.assertEqual(sorted(b.keys()), ["id", "text", "tokens", "tokens_length"])
                self.assertEqual(b.rows, len(b["id"]))
                self.assertEqual((b.round, b.bucket), (-1, -1))
                self.assertIsInstance(b.epoch, int)
                seqs.setdefault(b.worker, []).append(b.seq)
                self.assertIs(b["tokens"].base, b["id"].base, "every array's base is the batch's owner")
                self.assertFalse(hasattr(b["tokens"].base, "__array_interface__"))
            for w, s in seqs.items():
                self.assertEqual(len(s), len(set(s)), "worker %s: seqs repeat" % w)

    def test_fm_next_struct(self):
        # fm_next (the fm_batch struct), which the package no longer uses,
        # still serves C callers.
        import ctypes

        from feedmesh import _lib

        gc.collect()
        base = feedmesh.live_batches()
        with self.c.distribute(range_spec(30, 10), job=job_name("struct")) as it:
            vals = []
            out, err = ctypes.POINTER(_lib.CBatch)(), ctypes.c_void_p()
            while True:
                rc = _lib.lib().fm_next(it._handle, 5000, ctypes.byref(out), ctypes.byref(err))
                if rc == _lib.END:
                    break
                self.assertEqual(rc, _lib.OK)
                cb = out.contents
                self.assertEqual(cb.ntensors, 1)
                t = cb.tensors[0]
                self.assertEqual((t.name, t.dtype, t.ndim), (b"value", 4, 1))
                vals.extend((ctypes.c_int64 * t.shape[0]).from_address(t.data))
                self.assertEqual(feedmesh.live_batches(), base + 1)
                self.assertEqual(_lib.lib().fm_batch_release(cb.handle), _lib.OK)
                self.assertEqual(_lib.lib().fm_batch_release(cb.handle), 16)  # FM_ERR_CLOSED: released already
            assert_once(self, vals, 30)
        self.assertEqual(feedmesh.live_batches(), base)


class SignalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def _interrupted(self, interrupt):
        with self.c.distribute(SLOW_SPEC, job=job_name("sig"), gc_after=1) as it:
            fired = []

            def fire():
                fired.append(time.monotonic())
                interrupt()

            timer = threading.Timer(0.3, fire)
            timer.start()
            try:
                with self.assertRaises(KeyboardInterrupt):
                    next(it)
            finally:
                timer.cancel()
            delay = time.monotonic() - fired[0]
            self.assertLess(delay, 1.0, "KeyboardInterrupt %.2fs after the signal" % delay)
            # The iterator is still usable afterwards.
            with self.assertRaises(TimeoutError):
                it.next(timeout=0.2)

    def test_interrupt_main(self):
        self._interrupted(_thread.interrupt_main)

    def test_sigint(self):
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            self.skipTest("SIGINT is not Python's default handler here")
        self._interrupted(lambda: os.kill(os.getpid(), signal.SIGINT))

    def test_wait_releases_gil(self):
        def spin(stop, count):
            while not stop.is_set():
                count[0] += 1

        # The rate of a spinning thread alone, then while this one waits in
        # next(): a wait that held the GIL would leave it a few percent.
        stop, alone = threading.Event(), [0]
        t = threading.Thread(target=spin, args=(stop, alone))
        t.start()
        time.sleep(0.25)
        stop.set()
        t.join()
        with self.c.distribute(SLOW_SPEC, job=job_name("gil"), gc_after=1) as it:
            stop, during = threading.Event(), [0]
            t = threading.Thread(target=spin, args=(stop, during))
            t.start()
            try:
                with self.assertRaises(TimeoutError):
                    it.next(timeout=0.5)
            finally:
                stop.set()
                t.join()
        rate_alone, rate_during = alone[0] / 0.25, during[0] / 0.5
        self.assertGreater(rate_during, 0.2 * rate_alone,
                           "another thread ran at %.0f/s while next() waited, %.0f/s alone" % (rate_during, rate_alone))


def _child_report(w, fn):
    """In a forked child: run fn, write what it raised to w, exit at once."""
    try:
        fn()
        msg = "no error"
    except BaseException as e:
        msg = "%s: %s" % (type(e).__name__, e)
    os.write(w, msg.encode()[:4000])
    os._exit(0)


class ForkTest(unittest.TestCase):
    def _in_child(self, fn, exit_normally=False):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            if exit_normally:
                # Run what an exiting interpreter runs (finalizers, atexit)
                # with feedmesh objects inherited from the parent: it must
                # not call into the dead Go runtime, which would hang.
                try:
                    fn()
                    msg = "no error"
                except BaseException as e:
                    msg = "%s: %s" % (type(e).__name__, e)
                gc.collect()
                atexit._run_exitfuncs()
                os.write(w, msg.encode()[:4000])
                os._exit(0)
            _child_report(w, fn)
        os.close(w)
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                self.fail("the forked child hung")
            time.sleep(0.05)
        with os.fdopen(r, "rb") as f:
            msg = f.read().decode()
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, msg)
        return msg

    def test_fork_error(self):
        c = client()  # the library is loaded in this process
        it = c.distribute(range_spec(100, 10), job=job_name("fork"))
        b = next(it)
        try:
            msg = self._in_child(lambda: feedmesh.Client(ADDR, **CLIENT_OPTS))
            self.assertTrue(msg.startswith("ForkError:"), msg)
            self.assertIn("num_workers=0", msg)
            self.assertIn("spawn", msg)
            msg = self._in_child(lambda: next(it))
            self.assertTrue(msg.startswith("ForkError:"), msg)
            msg = self._in_child(lambda: it.stats(), exit_normally=True)
            self.assertTrue(msg.startswith("ForkError:"), msg)
            # The child's inherited batch stays readable (it is plain memory).
            msg = self._in_child(lambda: b["value"].sum(), exit_normally=True)
            self.assertEqual(msg, "no error")
            # The parent goes on as before.
            self.assertEqual(len(read_values(it)), 90)
        finally:
            it.close()
            c.close()

    def test_fork_before_first_client(self):
        # A process that forks before it loads the library can use feedmesh
        # in its children (a fresh interpreter: this one has loaded it).
        import subprocess

        code = """if True:
            import os, sys, feedmesh
            pid = os.fork()
            if pid == 0:
                c = feedmesh.Client(os.environ["FEEDMESH_TEST_ADDR"], transport="fast", log_level="error")
                with c.distribute({"source": {"range": {"stop": 30}}, "ops": [{"batch": {"size": 10}}]}, job=sys.argv[1]) as it:
                    n = sum(len(b["value"]) for b in it)
                c.close()
                os._exit(0 if n == 30 else 1)
            _, status = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(status))
        """
        r = subprocess.run([sys.executable, "-c", code, job_name("prefork")], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr.decode())

    def test_torch_fork_workers(self):
        need_torch(self)
        client().close()  # the library is loaded in this process
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(100, 10), job=job_name("tfork"), client_options=CLIENT_OPTS)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="fork")
        with self.assertRaises(feedmesh.ForkError) as cm:
            list(loader)
        self.assertIn("spawn", str(cm.exception))


def _stateful_worker(ds, state, fetch, barrier, out):
    """One DataLoader worker process as torchdata's StatefulDataLoader runs
    it (its worker loop, torchdata/stateful_dataloader/worker.py, with
    snapshot_every_n_steps=1): restore the dataset's state
    (load_state_dict) when it has one, create the iterator (iter(ds)) and
    take the initial state (ds.state_dict() at once), then fetch batches
    and take ds.state_dict() after each, as the state sent with it to the
    main process; the state after the end of data goes with the end.
    Fetches fetch batches (None: to the end); with a barrier, every worker
    has fetched one batch (so every worker is a consumer of the job) before
    any goes on. Puts (initial state, [(values, state) per batch], end
    state or None) on out."""
    try:
        if state is not None:
            ds.load_state_dict(state)
        it = iter(ds)
        initial = ds.state_dict()
        batches, end = [], None
        while fetch is None or len(batches) < fetch:
            try:
                b = next(it)
            except StopIteration:
                end = ds.state_dict()
                break
            batches.append((b["value"].numpy().copy(), ds.state_dict()))
            if barrier is not None and len(batches) == 1:
                barrier.wait(timeout=60)
                time.sleep(0.5)  # heartbeats: each hears of the other consumer
        ds.close()
        out.put((initial, batches, end))
    except BaseException as e:  # reported by the parent
        out.put((repr(e), None, None))


def run_stateful_workers(ds, states, fetch):
    """Runs one spawned worker process per entry of states (its saved state,
    or None) concurrently; returns [(initial, batches, end)] in worker
    order."""
    mp = multiprocessing.get_context("spawn")
    barrier = mp.Barrier(len(states)) if fetch is not None else None
    queues = [mp.Queue() for _ in states]
    procs = [mp.Process(target=_stateful_worker, args=(ds, st, fetch, barrier, q)) for st, q in zip(states, queues)]
    for p in procs:
        p.start()
    res = [q.get(timeout=120) for q in queues]
    for p in procs:
        p.join(timeout=60)
    for initial, batches, _ in res:
        if batches is None:
            raise AssertionError("worker failed: " + initial)
    return res


class TorchTest(unittest.TestCase):
    def setUp(self):
        need_torch(self)

    def test_num_workers_0(self):
        n = 3000
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(n, 50, split=100), job=job_name("t0"), client_options=CLIENT_OPTS)
        loader = torch.utils.data.DataLoader(ds, batch_size=None)
        vals = []
        for b in loader:
            self.assertIsInstance(b["value"], torch.Tensor)
            self.assertEqual(b["value"].dtype, torch.int64)
            vals.append(b["value"].numpy().copy())
        ds.close()
        assert_once(self, np.concatenate(vals), n)

    def test_offload_default(self):
        # auto where the training process iterates, remote in a DataLoader
        # worker process (several consumers on one host); offload= wins.
        from unittest import mock

        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(10, 5), job=job_name("toff"))
        self.assertEqual(ds.job_options_here()["offload"], "auto")
        with mock.patch("torch.utils.data.get_worker_info", return_value=object()):
            self.assertEqual(ds.job_options_here()["offload"], "remote")
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(10, 5), job=job_name("toff"), offload="local")
        with mock.patch("torch.utils.data.get_worker_info", return_value=object()):
            self.assertEqual(ds.job_options_here()["offload"], "local")

    def test_spawn_workers(self):
        n = 3000
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(n, 50, split=100), job=job_name("t2"), client_options=CLIENT_OPTS)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
        vals = [b["value"].numpy().copy() for b in loader]
        assert_once(self, np.concatenate(vals), n)

    def test_state_dict_resume(self):
        n = 3000
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(n, 30, split=100), job=job_name("tsd"), client_options=CLIENT_OPTS)
        self.assertEqual(ds.state_dict()["checkpoint"], None)
        vals = []
        for i, b in enumerate(torch.utils.data.DataLoader(ds, batch_size=None)):
            vals.append(b["value"].numpy().copy())
            if i == 19:
                break
        sd = ds.state_dict()
        self.assertIsInstance(sd["checkpoint"], bytes)
        ds.load_state_dict(sd)
        self.assertEqual(ds.state_dict(), sd)
        vals += [b["value"].numpy().copy() for b in torch.utils.data.DataLoader(ds, batch_size=None)]
        ds.close()
        assert_once(self, np.concatenate(vals), n)

    def test_state_dict_worker_processes(self):
        # torchdata's StatefulDataLoader protocol with num_workers=2, driven
        # as its worker loop drives it (torchdata is not installable here:
        # no Python package index): each worker process's copy of the
        # dataset is one consumer of the job; its state_dict() after each
        # batch it fetches goes with that batch, and the loader's
        # state_dict() holds, per worker, the state sent with the last
        # batch the training loop received from it. The workers fetch ahead
        # (prefetch): the loop has received 4 batches of each when the
        # checkpoint is taken, the workers fetched 6. A new run gives each
        # worker its own state back: together the loop's batches of the two
        # runs are every element once, the 2 fetched and never received
        # included. The job is much larger than a consumer's prefetch: each
        # element goes to one consumer, and the first worker's buffer could
        # otherwise take all of a small job before the second attaches.
        n = 30000
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(n, 30, split=100), job=job_name("tsdw"), client_options=CLIENT_OPTS)
        received, fetched = 4, 6
        first = run_stateful_workers(ds, [None, None], fetch=fetched)
        loop, states = [], []
        for initial, batches, _ in first:
            self.assertIsInstance(initial["checkpoint"], bytes, "the initial state, right after iter()")
            self.assertEqual(len(batches), fetched)
            loop += [v for v, _ in batches[:received]]
            states.append(batches[received - 1][1])  # the state sent with the last batch received
        rest = run_stateful_workers(ds, states, fetch=None)
        for _, batches, end in rest:
            self.assertIsInstance(end["checkpoint"], bytes, "the state sent with the end of data")
            loop += [v for v, _ in batches]
        assert_once(self, np.concatenate(loop), n)
        # The main process's copy, which gave copies to the workers, has no
        # checkpoint of theirs: it raises rather than return an empty one.
        with self.assertRaisesRegex(feedmesh.Error, "StatefulDataLoader"):
            ds.state_dict()
        with self.assertRaisesRegex(feedmesh.Error, "worker"):
            ds.stats()

    def test_state_dict_main_process_with_workers_raises(self):
        # A plain DataLoader with worker processes: ds.state_dict() in the
        # training process returned {"checkpoint": None} before, so a saved
        # training checkpoint resumed from nothing; it raises now.
        n = 600
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(n, 30, split=100), job=job_name("tmain"), client_options=CLIENT_OPTS)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
        vals = [b["value"].numpy().copy() for b in loader]
        assert_once(self, np.concatenate(vals), n)
        with self.assertRaisesRegex(feedmesh.Error, "StatefulDataLoader"):
            ds.state_dict()
        # Iterated here again, it is this process's state once more.
        ds.set_epoch(1)
        for i, b in enumerate(torch.utils.data.DataLoader(ds, batch_size=None)):
            if i == 2:
                break
        self.assertIsInstance(ds.state_dict()["checkpoint"], bytes)
        self.assertEqual(ds.stats()["batches"], 3)
        ds.close()

    def test_second_iteration_raises(self):
        # The same job name iterated again after it ran to its end: it
        # delivered nothing, silently, before.
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(300, 30, split=100), job=job_name("tagain"), client_options=CLIENT_OPTS)
        batches = [b["value"].numpy().copy() for b in torch.utils.data.DataLoader(ds, batch_size=None)]
        assert_once(self, np.concatenate(batches), 300)
        # 10 batches when one worker reads the 3 splits, up to 12 when each
        # split has its own (a partial batch at each split's end).
        self.assertEqual(ds.stats()["batches"], len(batches))
        with self.assertRaisesRegex(feedmesh.JobFinished, "set_epoch"):
            list(torch.utils.data.DataLoader(ds, batch_size=None))
        ds.close()

    def test_late_worker_reads_nothing(self):
        # A DataLoader worker that joins the job after its fellow workers
        # of the same iteration read it all gets no batch and no error;
        # a worker of a later iteration (a copy made after the job was
        # created), or one that read the job before, gets JobFinished.
        from unittest import mock

        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(300, 30, split=100), job=job_name("tlate"), client_options=CLIENT_OPTS)
        late = pickle.loads(pickle.dumps(ds))  # the iteration's copy, made as it starts
        reader = pickle.loads(pickle.dumps(ds))
        assert_once(self, np.concatenate([b["value"].numpy().copy() for b in reader]), 300)
        reader.close()
        worker = mock.Mock(num_workers=2, id=1)
        with mock.patch("torch.utils.data.get_worker_info", return_value=worker):
            self.assertEqual(list(late), [])
            with self.assertRaises(feedmesh.JobFinished):
                list(late)  # read once already
            time.sleep(1.1)  # the cluster tells a job's creation to the second
            again = pickle.loads(pickle.dumps(ds))  # a later iteration's copy
            with self.assertRaises(feedmesh.JobFinished):
                list(again)
            again.close()
        late.close()
        with self.assertRaises(feedmesh.JobFinished):  # not a worker
            list(ds)
        ds.close()

    def test_set_epoch(self):
        n = 300
        ds = fmtorch.FeedmeshDataset(ADDR, range_spec(n, 50, split=100), job=job_name("tep"), client_options=CLIENT_OPTS)
        for epoch in range(2):
            ds.set_epoch(epoch)
            vals = [b["value"].numpy().copy() for b in torch.utils.data.DataLoader(ds, batch_size=None)]
            assert_once(self, np.concatenate(vals), n)
        ds.close()

    def test_bfloat16(self):
        a = np.array([0x3F80, 0x4000], dtype=np.uint16)  # 1.0, 2.0 in bfloat16
        t = fmtorch.to_torch(a)
        self.assertEqual(t.dtype, torch.bfloat16)
        self.assertEqual(t.float().tolist(), [1.0, 2.0])


class StressTest(unittest.TestCase):
    def test_keep_nothing_bounded_memory(self):
        batches = int(os.environ.get("FEEDMESH_STRESS_BATCHES", "10000"))
        size = 1024  # 8 KiB batches: large enough for the client's buffer pool
        with client() as c, c.distribute(range_spec(batches * size, size, split=16 * size),
                                          job=job_name("stress"), delivery="at-most-once") as it:
            base = None
            peak_live, peak_rss, count = 0, 0, 0
            start = time.monotonic()
            for b in it:
                count += 1
                b["value"][0]  # touch it, keep nothing
                if count == min(1000, batches // 4):
                    gc.collect()
                    base = rss_bytes()
                elif base is not None and count % 100 == 0:
                    peak_rss = max(peak_rss, rss_bytes())
                    peak_live = max(peak_live, feedmesh.live_batches())
            del b
            secs = time.monotonic() - start
            self.assertEqual(count, batches)
            self.assertLessEqual(peak_live, 2, "batches handed out and not yet back")
            self.assertEqual(feedmesh.live_batches(), 0)
            grew = peak_rss - base
            print("stress: %d batches of %d KiB in %.1fs, RSS %d MiB at the start, grew by %.1f MiB at most"
                  % (batches, size * 8 // 1024, secs, base >> 20, grew / 2**20), file=sys.stderr)
            # Leaking every batch would grow RSS by batches x 8 KiB (78 MiB
            # for 10,000); the client's own bounds (prefetch, windows,
            # recycled buffers) are far below that.
            self.assertLess(grew, 48 << 20)


if __name__ == "__main__":
    unittest.main()
