"""One side of the launch benchmark, run in its own process (ours in .venv, the anchor in its venv).

Prints JSON: the durations of a bare Spark barrier stage of N no-op tasks, and of launches from the
call to the last node's user function starting. ``--impl tfos`` uses tensorflowonspark 2.2.5.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time


def noop(iterator):
    yield 0


def record_start(args, ctx):
    import os
    import time

    stamp = time.time()
    with open(os.path.join(args["dir"], f"{args['token']}-{ctx.executor_id}"), "w") as f:
        f.write(repr(stamp))


def bare_barrier(sc, n: int) -> float:
    t0 = time.time()
    sc.parallelize(range(n), n).barrier().mapPartitions(noop).collect()
    return time.time() - t0


def launch(sc, impl: str, n: int, workdir: str, token: str) -> float:
    args = {"dir": workdir, "token": token}
    t0 = time.time()
    if impl == "tfos":
        from tensorflowonspark import TFCluster

        cluster = TFCluster.run(sc, record_start, args, n, num_ps=0, input_mode=TFCluster.InputMode.TENSORFLOW,
                                master_node="chief")
    else:
        from tfos_notebook import TFCluster

        cluster = TFCluster.run(sc, record_start, args, n, num_ps=0, master_node="chief")
    cluster.shutdown()
    stamps = [float(open(p).read()) for p in glob.glob(os.path.join(workdir, f"{token}-*"))]
    if len(stamps) != n:
        raise RuntimeError(f"{len(stamps)} of {n} user functions ran")
    return max(stamps) - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--impl", choices=["ours", "tfos"], required=True)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(opts.master).appName(f"bench-launch-{opts.impl}")
             .config("spark.executor.cores", "1").config("spark.cores.max", str(opts.nodes))
             .config("spark.executor.memory", "1g").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
             .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", "")).getOrCreate())
    sc = spark.sparkContext
    while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < opts.nodes:
        time.sleep(0.2)
    workdir = tempfile.mkdtemp(prefix="bench-launch-")
    bare_barrier(sc, opts.nodes)  # warm the Python workers
    launch(sc, opts.impl, opts.nodes, workdir, "warmup")
    bare, launches = [], []
    for i in range(opts.runs):
        bare.append(bare_barrier(sc, opts.nodes))
        launches.append(launch(sc, opts.impl, opts.nodes, workdir, f"run{i}"))
    spark.stop()
    json.dump({"bare": bare, "launch": launches}, sys.stdout)


if __name__ == "__main__":
    main()
