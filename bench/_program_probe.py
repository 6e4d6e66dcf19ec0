"""One side of the whole-program clocks of bench/feed.py ``--layout tfos``, in a Spark application of its own.

Runs a TensorFlowOnSpark program (``TFCluster.run``, ``train(data, N)``, ``shutdown``) with our import
(``--impl ours``) or tensorflowonspark 2.2.5's (``--impl tfos``, from its own venv) over MNIST-sized
rows (784 floats + an int label) held by Spark, cached: ``--data lists`` (an RDD of (list, int)),
``numpy`` (an RDD of (float32 array, int)) or ``df`` (a DataFrame ``image array<float>, label int``;
TensorFlowOnSpark takes its ``.rdd``, whose rows are pyspark Rows). Beside it, in the same
application: Spark's own no-op pass over the same cached data (an RDD's rows unpickled and counted,
a DataFrame's Arrow read by a no-op ``mapInArrow``) and, for ours, the launch of a program with no
data (``TFCluster.run`` to the last function's start).

Every node runs TFoS's consumer loop: ``DataFeed.next_batch``, rows made numpy arrays, a training
step (``--model``: a small Keras model's ``train_on_batch``, so the node imports TensorFlow and builds
it first; without: the numpy batch is the step). Prints one JSON line: per program the whole
program's seconds, each node's first step after ``TFCluster.run``, rows fed, and the peak RSS of the
driver (this process and its JVM) and of each executor (its JVM and every process under it).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile
import threading
import time

import numpy as np

WIDTH = 784


def train_fn(args, ctx):
    """The node function without ``--model``: the numpy batch is the step (no TensorFlow named, so
    none is imported on the nodes)."""
    consume(args, ctx, None)


def train_model_fn(args, ctx):
    """With ``--model``: a small Keras model's ``train_on_batch`` is the step."""
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(10)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    consume(args, ctx, model)


def consume(args, ctx, model):
    """TensorFlowOnSpark's consumer loop; records the first step's wall time and the rows seen."""
    import json
    import os
    import resource
    import time

    import numpy as np

    if args["impl"] == "tfos":
        from tensorflowonspark import TFNode
    else:
        from tfos_notebook import TFNode
    ready = time.time()
    feed = TFNode.DataFeed(ctx.mgr, True)
    first, rows = None, 0
    while not feed.should_stop():
        batch = feed.next_batch(args["batch"])
        if not batch:
            continue
        x = np.asarray([r[0] for r in batch], np.float32)
        y = np.asarray([r[1] for r in batch], np.int64)
        if model is not None:
            model.train_on_batch(x, y)
        if first is None:
            first = time.time()
        rows += len(y)
    record = {"first": first, "ready": ready, "rows": rows, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    with open(os.path.join(args["out"], f"{args['token']}-{ctx.job_name}-{ctx.task_index}.json"), "w") as f:
        json.dump(record, f)


def record_start(args, ctx):
    import os
    import time

    with open(os.path.join(args["out"], f"{args['token']}-start-{ctx.task_index}-{ctx.job_name}"), "w") as f:
        f.write(repr(time.time()))


# -- data --------------------------------------------------------------------------------------
def _rows(kind: str, part: int, per_part: int):
    rng = np.random.default_rng(part)
    for _ in range(per_part):
        image = rng.random(WIDTH, dtype=np.float32)
        yield (image.tolist() if kind == "lists" else image), int(rng.integers(0, 10))


def make_data(spark, kind: str, rows: int, partitions: int):
    per_part = rows // partitions
    if kind == "bigdf":  # computed as it is read, never held: each pass reads it from its source
        return spark.range(0, rows, numPartitions=partitions).selectExpr(
            f"array_repeat(cast((id % 256) / 255.0 as float), {WIDTH}) as image", "cast(id % 10 as int) as label")
    if kind == "df":
        data = spark.range(0, per_part * partitions, numPartitions=partitions).selectExpr(
            f"transform(sequence(0, {WIDTH - 1}), i -> cast(((id * 7 + i) % 256) / 255.0 as float)) as image",
            "cast(id % 10 as int) as label")
    else:
        sc = spark.sparkContext
        data = sc.parallelize(range(partitions), partitions).flatMap(lambda p: _rows(kind, p, per_part))
    data = data.cache()
    data.count()
    return data


def _count_rows(rows):
    yield sum(1 for _ in rows)


def _count_batches(batches):
    import numpy as np
    import pyarrow as pa

    # on the column's buffer: from_pylist would import pandas into the worker, for the next task too
    n = np.array([sum(b.num_rows for b in batches)], np.int64)
    yield pa.RecordBatch.from_arrays([pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(n)])], names=["n"])


def noop_pass(data, arrow: bool) -> float:
    """Seconds for Spark's own no-op pass over ``data``: an RDD's rows unpickled and counted, or
    (``arrow``) a DataFrame's rows read as Arrow, the fastest way they reach Python."""
    t0 = time.perf_counter()
    if arrow:
        data.mapInArrow(_count_batches, "n long").collect()
    else:
        data.mapPartitions(_count_rows).collect()
    return time.perf_counter() - t0


# -- memory ------------------------------------------------------------------------------------
class PeakRss:
    """Samples, every ``every`` seconds, the RSS of the driver (this process and its JVM) and of
    each executor of ``app_id`` (its JVM and every process under it), keeping the peaks in MiB."""

    def __init__(self, sc, every: float = 0.1) -> None:
        import psutil

        self.psutil, self.every = psutil, every
        self.driver = [psutil.Process(), psutil.Process(sc._gateway.proc.pid)]
        app = sc.applicationId
        self.executors = [p for p in psutil.process_iter(["cmdline"])
                          if "CoarseGrainedExecutorBackend" in " ".join(p.info["cmdline"] or ()) and
                          app in " ".join(p.info["cmdline"] or ())]
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree_mb(self, roots) -> float:
        total = 0
        for root in roots:
            try:
                for p in [root, *root.children(recursive=True)]:
                    total += p.memory_info().rss
            except self.psutil.Error:
                continue
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self) -> None:
        values = {"driver": self._tree_mb(self.driver[:1]) + self._tree_mb(self.driver[1:]),
                  "disk": _disk_mb()}
        for i, ex in enumerate(self.executors):
            values[f"executor{i}"] = self._tree_mb([ex])
        for k, v in values.items():
            self.peaks[k] = max(self.peaks.get(k, 0.0), v)

    def __enter__(self) -> PeakRss:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _disk_mb() -> float:
    """MiB on this machine's disk in the nodes' spill files and Spark's shuffle files."""
    total = 0
    tmp = tempfile.gettempdir()
    for pattern in ("tfos-*-spill-*/*", "spark-*/executor-*/blockmgr-*/*/*"):
        for path in glob.glob(os.path.join(tmp, pattern)):
            try:
                total += os.stat(path).st_size
            except OSError:
                continue
    return total / 2**20


# -- programs ----------------------------------------------------------------------------------
def program(sc, opts, data, epochs: int, out: str, token: str) -> dict:
    """One whole TFoS program over ``data``: run, train ``epochs``, shutdown."""
    if opts.impl == "tfos":
        from tensorflowonspark import TFCluster

        fed = data.rdd if opts.data.endswith("df") else data
        extra = {}
    else:
        from tfos_notebook import TFCluster

        fed, extra = data, {"feed_buffer_mb": opts.buffer_mb}
    args = {"impl": opts.impl, "batch": opts.batch, "out": out, "token": token}
    with PeakRss(sc) as rss:
        t0 = time.time()
        main_fun = train_model_fn if opts.model else train_fn
        cluster = TFCluster.run(sc, main_fun, args, opts.workers, num_ps=0, tensorboard=False,
                                input_mode=TFCluster.InputMode.SPARK, master_node="chief", **extra)
        returned = time.time() - t0
        cluster.train(fed, num_epochs=epochs)
        cluster.shutdown()
        seconds = time.time() - t0
    nodes = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{token}-*.json")))]
    result = {"epochs": epochs, "t0": t0, "seconds": seconds, "run_returns": returned,
              "first_step": [n["first"] - t0 for n in nodes], "ready": [n["ready"] - t0 for n in nodes],
              "rows": [n["rows"] for n in nodes], "node_rss_mb": [n["rss"] / 1024 for n in nodes],
              "peak_mb": rss.peaks}
    if opts.impl == "ours":
        result["phases"] = phases(cluster.run_handle, t0)
    result["stages"] = stages(sc, t0)
    return result


def phases(run, t0: float) -> dict:
    """When our run's milestones happened, in seconds after ``TFCluster.run``."""
    from tfos_notebook.runtime.driver.events import ClusterReady, LaunchSubmitted, Registered

    out = {}
    for name, kind in (("submitted", LaunchSubmitted), ("ready", ClusterReady)):
        events = run.events.events(kind)
        if events:
            out[name] = events[0].t - t0
    registered = run.events.events(Registered)
    if registered:
        out["registered"] = [e.t - t0 for e in registered]
    return out


def stages(sc, t0: float) -> list[dict]:
    """The application's Spark stages submitted after ``t0`` (from its status REST API), with their
    submission, first task and completion times in seconds after ``t0``."""
    import urllib.request
    from datetime import datetime

    def seconds(stamp: str | None) -> float | None:
        if not stamp:
            return None
        return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() - t0

    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    with urllib.request.urlopen(url, timeout=10) as answer:
        found = json.load(answer)
    out = [{"name": st["name"].split(" at ")[0], "tasks": st["numTasks"], "submitted": seconds(st.get("submissionTime")),
            "first_task": seconds(st.get("firstTaskLaunchedTime")), "completed": seconds(st.get("completionTime")),
            "run_s": st.get("executorRunTime", 0) / 1000, "cpu_s": st.get("executorCpuTime", 0) / 1e9,
            "shuffle_write_s": st.get("shuffleWriteTime", 0) / 1e9, "shuffle_write_mb": st.get("shuffleWriteBytes", 0) / 2**20,
            "gc_s": st.get("jvmGcTime", 0) / 1000}
           for st in found]
    return sorted((st for st in out if st["submitted"] is not None and st["submitted"] >= 0),
                  key=lambda st: st["submitted"])


def launch_only(sc, opts, out: str, token: str) -> float:
    """Our launch with no data: ``TFCluster.run`` to the last function's start."""
    from tfos_notebook import TFCluster

    t0 = time.time()
    cluster = TFCluster.run(sc, record_start, {"out": out, "token": token}, opts.workers, num_ps=0,
                            master_node="chief")
    cluster.shutdown()
    stamps = [float(open(p).read()) for p in glob.glob(os.path.join(out, f"{token}-start-*"))]
    return max(stamps) - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=["ours", "tfos"], required=True)
    parser.add_argument("--data", choices=["lists", "numpy", "df", "bigdf"], required=True,
                        help="bigdf: a DataFrame computed as it is read (never cached), for data bigger than memory")
    parser.add_argument("--master", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows", type=int, default=40000, help="rows in all (not per worker)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[2])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--buffer-mb", type=int, default=16)
    parser.add_argument("--model", action="store_true")
    parser.add_argument("--executor-memory", default="2g")
    opts = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(opts.master).appName(f"bench-program-{opts.impl}-{opts.data}")
             .config("spark.executor.cores", "1").config("spark.cores.max", str(opts.workers))
             .config("spark.executor.memory", opts.executor_memory).config("spark.ui.port", "0")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
             .config("spark.executorEnv.TFOS_SERVER_HOST", "127.0.0.1")
             .config("spark.executorEnv.TF_CPP_MIN_LOG_LEVEL", "2")
             .config("spark.executorEnv.TF_USE_LEGACY_KERAS", "1")
             .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", "")).getOrCreate())
    sc = spark.sparkContext
    while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < opts.workers:
        time.sleep(0.2)
    out = tempfile.mkdtemp(prefix="bench-program-")
    data = make_data(spark, opts.data, opts.rows, opts.partitions)
    # a DataFrame: ours reads it as Arrow; tensorflowonspark takes its .rdd (pyspark Rows)
    arrow = opts.data.endswith("df") and opts.impl == "ours"
    passed = data.rdd if opts.data.endswith("df") and not arrow else data
    passes = 1 if opts.data == "bigdf" else 3
    answer: dict = {"impl": opts.impl, "data": opts.data, "noop": [noop_pass(passed, arrow) for _ in range(passes)]}
    answer["programs"] = [program(sc, opts, data, epochs, out, f"p{i}") for i, epochs in enumerate(opts.epochs)]
    if opts.impl == "ours":  # after the programs, which must not find the executors' Python workers warmed by it
        answer["launch"] = [launch_only(sc, opts, out, f"launch{i}") for i in range(4)][1:]
    spark.stop()
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
