"""Sweeps whose trials are distributed runs: one trial at a time, as users run them today, against
as many at once as the cluster's slots hold, and the pruner's saving on top.

A real standalone cluster of 2 workers x 2 cores on 127.0.0.1: 4 task slots for the application.
The same sweep each time: ``--trials`` trials of 2 nodes each (``tfos_notebook.examples.sweep_trial``,
whose steps wait rather than compute, as a GPU-bound step leaves its host's CPUs idle: on this
machine of two cores trials that computed would only share the cores), Optuna's random sampler
with the same seed (so every way runs the same trials, of equal length), in three ways:

- ``serial``: the anchor, one distributed trial at a time (``parallel=1``): what Hyperopt's serial
  ``Trials`` or ``study.optimize`` with a distributed run per trial do, and what Databricks
  advises for trials that are themselves distributed;
- ``packed``: this project's way, ``parallel`` unset: as many trials at once as the slots hold (2);
- ``packed+median``: the same with the median pruner, which stops trials worse than the median of
  the finished ones at the same step.

For each: the wall time, and the share of the slots' seconds that trials' nodes held (nodes x each
trial's seconds from its launch to its run's end, over slots x wall). Prints every sweep, the
medians of each way over ``--repeats`` and the ratios; the goal is ``packed`` at least
(slots / nodes per trial) x 0.8 = 1.6 times as fast as ``serial``.

    python bench/sweep.py [--repeats 2] [--trials 8] [--plot docs/sweep_benchmark.png]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

WAYS = {"serial": {"parallel": 1, "pruner": "none"}, "packed": {"parallel": None, "pruner": "none"},
        "packed+median": {"parallel": None, "pruner": "median"}}
SLOTS, NODES = 4, 2


def one_sweep(spark, way: str, trials: int, seed: int, args: dict) -> dict:
    import tfos_notebook
    from tfos_notebook.examples.sweep_trial import SPACE, trial
    from tfos_notebook.search.events import TrialEnded, TrialStarted

    storage = f"sqlite:///{tempfile.mkdtemp(prefix='tfos-bench-sweep-')}/study.db"
    t0 = time.time()
    handle = tfos_notebook.sweep(trial, SPACE, trials=trials, workers=NODES, sampler="random", seed=seed,
                                 storage=storage, args=args, spark=spark, monitor="none", tensorboard=False,
                                 mlflow=False, **WAYS[way])
    best = handle.wait(1800)
    wall = time.time() - t0
    events = handle.sweep.events.events()
    began = {e.number: e.t for e in events if isinstance(e, TrialStarted)}
    spans = [(began[e.number] - t0, e.t - t0, e.state) for e in events if isinstance(e, TrialEnded)]
    busy = sum(NODES * (end - start) for start, end, _ in spans)
    return {"way": way, "wall": wall, "busy": busy / (SLOTS * wall), "best": best["value"],
            "pruned": sum(1 for *_, s in spans if s == "pruned"), "spans": spans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-secs", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--plot", default="")
    opts = parser.parse_args()

    from pyspark.sql import SparkSession

    from tfos_notebook.devcluster import StandaloneCluster
    from tfos_notebook.runtime.driver.spark import backend_for
    from tfos_notebook.runtime.host.timeouts import Deadline

    args = {"steps": opts.steps, "step_secs": opts.step_secs}
    rows = []
    with StandaloneCluster(workers=2, cores=2, gpus_per_worker=0) as cluster:
        builder = SparkSession.builder.appName("tfos-bench-sweep")
        for key, value in {**cluster.spark_conf(gpus_per_task=0, executor_cores=2),
                           "spark.ui.showConsoleProgress": "false"}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        Deadline(120).wait_until(lambda: backend_for(spark).cluster().total_slots >= SLOTS, interval=0.2)
        try:
            for repeat in range(opts.repeats):
                for way in WAYS:
                    row = one_sweep(spark, way, opts.trials, opts.seed, args)
                    row["repeat"] = repeat
                    rows.append(row)
                    print(f"{way:14} #{repeat}: wall {row['wall']:6.1f} s, slots busy {row['busy']:5.1%}, "
                          f"pruned {row['pruned']}, best loss {row['best']:.4f}", flush=True)
        finally:
            spark.stop()
    print()
    medians = {}
    for way in WAYS:
        mine = [r for r in rows if r["way"] == way]
        medians[way] = {k: statistics.median(r[k] for r in mine) for k in ("wall", "busy")}
        print(f"{way:14} median of {len(mine)}: wall {medians[way]['wall']:.1f} s, slots busy "
              f"{medians[way]['busy']:.1%}")
    serial = medians["serial"]["wall"]
    goal = SLOTS / NODES * 0.8
    for way in ("packed", "packed+median"):
        print(f"serial / {way}: x{serial / medians[way]['wall']:.2f} (goal for packed: x{goal:.1f})")
    if opts.plot:
        plot([r for r in rows if r["repeat"] == 0], opts.plot)


def plot(rows: list[dict], path: str) -> None:
    """Each way's trials on a time line, one bar per trial (grey: pruned)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 1, figsize=(9, 1.3 * len(rows) + 0.6), sharex=True)
    for ax, row in zip(axes, rows, strict=True):
        for i, (start, end, state) in enumerate(sorted(row["spans"])):
            colour = {"complete": "#2563eb", "pruned": "#9ca3af"}.get(state, "#dc2626")
            ax.barh(i, end - start, left=start, color=colour, height=0.8)
        ax.set_yticks([])
        ax.set_ylabel(row["way"], rotation=0, ha="right", va="center", fontsize=8)
        ax.text(row["wall"], 0, f" {row['wall']:.0f} s", va="bottom", fontsize=8)
    axes[-1].set_xlabel("seconds from the sweep's start (a bar per trial of 2 nodes; grey: pruned)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
