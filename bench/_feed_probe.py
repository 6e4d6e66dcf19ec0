"""One measurement of bench/feed.py, in a Spark application of its own on the given cluster.

Runs with our venv (``--impl ours-df|ours-rdd|ours-datafeed|ceiling``, or in-stage
``ours-instage-datafeed`` (TFoS's program with our import) / ``ours-instage-df``) or the anchor's
(``--impl tfos-row|tfos-chunk``), feeds MNIST-sized rows (784 float32 + an int64 label) to
``--workers`` nodes and prints one JSON line: the rows/s each node consumed, per window of
``--rows-per-worker`` rows (one epoch's share); for ``ours-df`` also Spark's own Arrow read rate
of the same DataFrame (a no-op ``mapInArrow``). A node's clock starts at its first batch, so
start-up and the wait for the first data are left out; every consumer turns its batches into
numpy arrays or tensors of ``--batch`` rows, as a training step would need them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WIDTH = 784
CHUNK = 64  # rows per RDD element for tfos-chunk


class Meter:
    """Rows/s over windows of ``window`` rows, from the first batch on."""

    def __init__(self, window: int) -> None:
        self.window, self.start, self.rows, self.rates = window, None, 0, []

    def add(self, n: int) -> None:
        now = time.perf_counter()
        if self.start is None:
            self.start = now
            return
        self.rows += n
        if self.rows >= self.window:
            self.rates.append(self.rows / (now - self.start))
            self.start, self.rows = now, 0


# -- node functions ----------------------------------------------------------------------------
def datafeed_node(args, ctx):
    """TFoS's consumer loop (runs with TFoS's TFNode or ours): next_batch, then numpy batches."""
    if args["impl"].startswith("tfos"):
        from tensorflowonspark import TFNode
    else:
        from tfos_notebook import TFNode
    feed = TFNode.DataFeed(ctx.mgr, True)
    meter = Meter(args["rows_per_worker"])
    per_call = max(1, args["batch"] // args["chunk"])
    while not feed.should_stop():
        items = feed.next_batch(per_call)
        if not items:
            continue
        if args["chunk"] == 1:
            x, y = np.stack([np.asarray(r[0], np.float32) for r in items]), np.asarray([r[1] for r in items])
        else:
            x, y = np.concatenate([r[0] for r in items]), np.concatenate([r[1] for r in items])
        assert x.shape[1] == WIDTH
        meter.add(len(y))
    with open(os.path.join(args["out"], f"{ctx.job_name}-{ctx.task_index}.json"), "w") as f:
        json.dump(meter.rates, f)
    return meter.rates


def _epoch_rates(ds, epochs: int) -> list[float]:
    rates = []
    for _ in range(epochs):
        start, rows, now = None, 0, 0.0
        for _, y in ds:
            now = time.perf_counter()
            if start is None:
                start = now
                continue
            rows += int(y.shape[0])
        rates.append(rows / (now - start))
    return rates


def dataset_node(args, ctx):
    """Ours: ctx.dataset, one epoch per pass (an RDD of tuples has columns _1, _2)."""
    x, y = ("image", "label") if args["impl"].endswith("-df") else ("_1", "_2")
    return _epoch_rates(ctx.dataset(args["batch"], features=x, label=y), args["epochs"])


def ceiling_node(args, ctx):
    """The ceiling: tf.data over the same rows already in this process's memory."""
    import tensorflow as tf

    rng = np.random.default_rng(ctx.task_index)
    n = args["rows_per_worker"]
    x, y = rng.random((n, WIDTH), dtype=np.float32), rng.integers(0, 10, n)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args["batch"]).prefetch(2)
    return _epoch_rates(ds, args["epochs"])


# -- data ----------------------------------------------------------------------------------------
def _rows(part: int, per_part: int):
    rng = np.random.default_rng(part)
    for _ in range(per_part):
        yield rng.random(WIDTH, dtype=np.float32), int(rng.integers(0, 10))


def _chunks(part: int, per_part: int):
    rng = np.random.default_rng(part)
    for _ in range(per_part // CHUNK):
        yield rng.random((CHUNK, WIDTH), dtype=np.float32), rng.integers(0, 10, CHUNK)


def make_data(spark, impl: str, rows: int, partitions: int):
    sc = spark.sparkContext
    per_part = rows // partitions
    if impl == "ours-df":
        df = spark.range(0, per_part * partitions, numPartitions=partitions).selectExpr(
            f"transform(sequence(0, {WIDTH - 1}), i -> cast(((id * 7 + i) % 256) / 255.0 as float)) as image",
            "id % 10 as label").cache()
        df.count()
        return df
    gen = _chunks if impl == "tfos-chunk" else _rows
    rdd = sc.parallelize(range(partitions), partitions).flatMap(lambda p: gen(p, per_part)).cache()
    rdd.count()
    return rdd


def _count_batches(batches):
    import pyarrow as pa

    yield pa.RecordBatch.from_pylist([{"n": sum(b.num_rows for b in batches)}])


def _count_rows(rows):
    yield sum(1 for _ in rows)


def spark_noop_rates(data, rows: int, workers: int, repeats: int) -> list[float]:
    """A no-op pass over ``data`` (an RDD: rows unpickled and counted in each task), per worker:
    the most any path could get the same rows out of Spark here."""
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        data.mapPartitions(_count_rows).collect()
        rates.append(rows / (time.perf_counter() - t0) / workers)
    return rates


def spread_seconds(data, workers: int) -> float:
    """Seconds Spark takes to deal ``data`` out to the nodes' partitions (the shuffle an in-stage
    feed runs once per attempt, before the nodes' clocks start)."""
    from tfos_notebook.runtime.driver.feed.instage import spread

    spread_out = spread(data, [("chief", 0)] + [("worker", i) for i in range(workers - 1)])
    t0 = time.perf_counter()
    spread_out.count()
    return time.perf_counter() - t0


def spark_arrow_rates(df, rows: int, workers: int, repeats: int) -> list[float]:
    """Spark's own Arrow read of ``df`` (a no-op ``mapInArrow`` on every slot, no TensorFlow
    running), per worker: the most any Spark-fed path could deliver here."""
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        df.mapInArrow(_count_batches, "n long").collect()
        rates.append(rows / (time.perf_counter() - t0) / workers)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", required=True,
                        choices=["ours-df", "ours-rdd", "ours-datafeed", "ceiling", "tfos-row", "tfos-chunk",
                 "ours-instage-datafeed", "ours-instage-df"])
    parser.add_argument("--master", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows-per-worker", type=int, default=40000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    opts = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(opts.master).appName(f"bench-feed-{opts.impl}")
             .config("spark.executor.cores", str(opts.cores)).config("spark.cores.max", str(opts.cores * opts.workers))
             .config("spark.executor.memory", "2g").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
             .config("spark.executorEnv.TFOS_SERVER_HOST", "127.0.0.1")
             .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(p for p in sys.path if p)).getOrCreate())
    sc = spark.sparkContext
    while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < opts.workers:
        time.sleep(0.2)
    out = tempfile.mkdtemp(prefix="bench-feed-")
    args = {"impl": opts.impl, "batch": opts.batch, "epochs": opts.epochs, "rows_per_worker": opts.rows_per_worker,
            "chunk": CHUNK if opts.impl == "tfos-chunk" else 1, "out": out}
    rows = opts.rows_per_worker * opts.workers
    extra: dict[str, list[float]] = {}
    if opts.impl.startswith("tfos"):
        from tensorflowonspark import TFCluster

        data = make_data(spark, opts.impl, rows, opts.partitions)
        t0 = time.perf_counter()
        cluster = TFCluster.run(sc, datafeed_node, args, opts.workers, num_ps=0, tensorboard=False,
                                input_mode=TFCluster.InputMode.SPARK, master_node="chief")
        extra[f"launch-{opts.impl}"] = [time.perf_counter() - t0]
        cluster.train(data, num_epochs=opts.epochs)
        cluster.shutdown()
        rates = [json.loads(p.read_text()) for p in sorted(Path(out).glob("*.json"))]
    elif opts.impl.startswith("ours-instage"):
        from tfos_notebook import Run, TFCluster
        from tfos_notebook.runtime.driver.events import ClusterReady

        df = opts.impl == "ours-instage-df"
        data = make_data(spark, "ours-df" if df else "ours-rdd", rows, opts.partitions)
        noop = spark_arrow_rates if df else spark_noop_rates  # the same rows out of Spark, nothing else
        extra["spark-arrow" if df else "spark-noop-rdd"] = noop(data, rows, opts.workers, opts.epochs + 1)[1:]
        extra[f"spread-{opts.impl}"] = [spread_seconds(data, opts.workers)]
        t0, wall0 = time.perf_counter(), time.time()
        if opts.impl == "ours-instage-datafeed":  # TensorFlowOnSpark's program, with our import
            cluster = TFCluster.run(sc, datafeed_node, args, opts.workers, num_ps=0, tensorboard=False,
                                    input_mode=TFCluster.InputMode.SPARK, master_node="chief", feed_buffer_mb=16)
            extra["launch-ours-instage"] = [time.perf_counter() - t0]
            cluster.train(data, num_epochs=opts.epochs)
            run = cluster.run_handle
            cluster.shutdown()
        else:
            run = Run(sc, dataset_node, args, opts.workers, input_mode="spark", feed_buffer_mb=16)
            run.start(data, epochs=opts.epochs).wait(1800)
        extra[f"ready-{opts.impl}"] = [run.events.events(ClusterReady)[0].t - wall0]
        rates = list(run.results.values())
        extra[f"{opts.impl}-first"] = [node[0] for node in rates if node]  # the epoch read from Spark
    else:
        from tfos_notebook import Run

        fn = {"ours-df": dataset_node, "ours-rdd": dataset_node, "ours-datafeed": datafeed_node,
              "ceiling": ceiling_node}[opts.impl]
        if opts.impl == "ceiling":
            run = Run(sc, fn, args, opts.workers).start()
        else:
            data = make_data(spark, opts.impl, rows, opts.partitions)
            if opts.impl == "ours-df":
                extra["spark-arrow"] = spark_arrow_rates(data, rows, opts.workers, opts.epochs + 1)[1:]
            run = Run(sc, fn, args, opts.workers, input_mode="spark", feed_buffer_mb=16).start()
            run.train(data, num_epochs=opts.epochs)
        run.wait(1800)
        rates = list(run.results.values())
    spark.stop()
    print(json.dumps({"impl": opts.impl, "rates": rates, "extra": extra}))


if __name__ == "__main__":
    main()
