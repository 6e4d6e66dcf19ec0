"""Launch on a Spark Connect session beside a bare barrier ``mapInArrow`` job of the same size, in
the same run (by hand: ``.venv/bin/python bench/connect_launch.py --runs 7``).

A Spark Connect server (``local[3]`` on 127.0.0.1, from pyspark's own jars) runs as its own
process; this process is only its client. Each round times a bare barrier ``mapInArrow`` of N no-op
tasks, then our launch from ``Run(...).start()`` to the last node's user function starting. The
overhead is the difference of the medians; the goal is <= 0.5 s.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tfos_notebook.devcluster import ConnectServer  # noqa: E402


def noop(batches):
    for _ in batches:
        pass
    yield from ()


def record_start(args, ctx):
    import os
    import time

    stamp = time.time()
    with open(os.path.join(args["dir"], f"{args['token']}-{ctx.job_name}{ctx.task_index}"), "w") as f:
        f.write(repr(stamp))


def bare_barrier(spark, n: int) -> float:
    t0 = time.time()
    spark.range(0, n, 1, n).mapInArrow(noop, "id long", barrier=True).collect()
    return time.time() - t0


def launch(spark, n: int, workdir: str, token: str) -> float:
    from tfos_notebook import Run

    t0 = time.time()
    run = Run(spark, record_start, {"dir": workdir, "token": token}, n).start()
    run.wait(300)
    stamps = [float(open(p).read()) for p in glob.glob(os.path.join(workdir, f"{token}-*"))]
    if len(stamps) != n:
        raise RuntimeError(f"{len(stamps)} of {n} user functions ran")
    return max(stamps) - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--runs", type=int, default=7)
    opts = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    with ConnectServer(cores=opts.nodes + 1) as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()
        workdir = tempfile.mkdtemp(prefix="bench-connect-")
        bare_barrier(spark, opts.nodes)  # Python workers start; the first launch runs the probe job
        launch(spark, opts.nodes, workdir, "warmup")
        bare, ours = [], []
        for i in range(opts.runs):
            bare.append(bare_barrier(spark, opts.nodes))
            ours.append(launch(spark, opts.nodes, workdir, f"run{i}"))
        spark.stop()
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"N={opts.nodes}, {opts.runs} runs, load average {os.getloadavg()[0]:.1f}")
    print(f"bare barrier mapInArrow: median {b:.3f} s  {[round(x, 3) for x in bare]}")
    print(f"tfos_notebook launch:    median {o:.3f} s  {[round(x, 3) for x in ours]}")
    print(f"overhead: {o - b:.3f} s (goal <= 0.5 s); ratio launch / bare {o / b:.2f}x")


if __name__ == "__main__":
    main()
