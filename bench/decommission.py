"""What a decommission notice saves: steps lost and wall time when an executor leaves mid-run.

A real standalone cluster of 3 one-core workers on 127.0.0.1 with graceful decommission on, and a
2-node tf-keras run (``tfos_notebook.examples.elastic``: MultiWorkerMirroredStrategy, 4 epochs of 30
steps of ``--step-secs`` each, ``ctx.callbacks()``: its backup at every epoch's end). At a random step of the second or third epoch the worker hosting
``worker:0``'s executor is told to leave, in two ways that alternate, with the same random steps:

- ``notice``: this project's way: SIGPWR to that worker (Spark's graceful decommission); the nodes
  save at the next step and the run is relaunched from there (the idle third worker's slot is
  free at once: same size).
- ``anchor``: what every peer does: the node is lost (its executor SIGKILLed at the same step,
  as the cloud takes the node at the end of its notice without the trainer acting on it), and the
  run is relaunched from its last periodic checkpoint (the epoch's end backup) with ``retries``.

Each node writes the step it finished to a file per attempt; ``steps lost`` is how many
of the steps the first attempt ran were run again (its last step less the step the second attempt
resumed at), ``wall s`` the whole run, ``after s`` from the notice (or the kill) to the run's end.
Prints every run, then the medians of each way and the ratios. A replacement worker is started
after each ``notice`` run (the decommissioned one stays, refusing executors).

    python bench/decommission.py [--pairs 3] [--seed 7] [--plot docs/decommission_benchmark.png]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

def one_run(spark, cluster, way: str, at_step: int, step_secs: float) -> dict:
    from tfos_notebook import Run
    from tfos_notebook.examples.elastic import train
    from tfos_notebook.runtime.driver.events import CheckpointSaved, Registered

    trace = tempfile.mkdtemp(prefix="tfos-bench-decommission-")
    args = {"trace": trace, "step_secs": step_secs}
    run = Run(spark, train, args, 2, model_dir=os.path.join(trace, "model"), retries=1, replacement_grace=30.0)
    acted: dict = {}

    def act():
        chief = os.path.join(trace, "0-chief0")
        while not run.done:
            try:
                step = int(Path(chief).read_text() or 0)
            except (OSError, ValueError):
                step = 0
            if step >= at_step:
                executor = next(e.executor_id for e in run.events.events(Registered) if e.role == "worker")
                proc = cluster.executor_process(executor, spark.sparkContext.applicationId)
                acted["t"] = time.monotonic()
                if way == "notice":
                    proc.parent().send_signal(signal.SIGPWR)  # the executor's worker
                else:
                    proc.kill()
                return
            time.sleep(0.01)

    t0 = time.monotonic()
    run.start()
    threading.Thread(target=act, daemon=True).start()
    result = run.wait(600)
    end = time.monotonic()
    last = max(int(Path(trace, name).read_text()) for name in os.listdir(trace) if name.startswith("0-"))
    saved = run.events.events(CheckpointSaved)
    return {"way": way, "at": at_step, "last": last, "resumed": result["start"], "lost": last - result["start"],
            "final": result["final"], "wall": end - t0, "after": end - acted["t"],
            "checkpoint_s": saved[0].seconds if saved else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--step-secs", type=float, default=0.2)
    parser.add_argument("--plot", default="")
    opts = parser.parse_args()

    from pyspark.sql import SparkSession

    from tfos_notebook.devcluster import StandaloneCluster
    from tfos_notebook.examples.elastic import STEPS_PER_EPOCH
    from tfos_notebook.runtime.driver.spark import backend_for
    from tfos_notebook.runtime.driver.spark.standalone import master_state
    from tfos_notebook.runtime.host.timeouts import Deadline

    rng = random.Random(opts.seed)
    steps = [rng.randrange(STEPS_PER_EPOCH + 1, 3 * STEPS_PER_EPOCH) for _ in range(opts.pairs)]
    rows = []
    with StandaloneCluster(workers=3, cores=1, gpus_per_worker=0, decommission=True) as cluster:
        builder = SparkSession.builder.appName("tfos-bench-decommission")
        for key, value in {**cluster.spark_conf(gpus_per_task=0, executor_cores=1),
                           "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
                           "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1"}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        backend = backend_for(spark)
        try:
            for at in steps:
                for way in ("notice", "anchor"):
                    state = master_state(cluster.master_url, cluster.ui_port, timeout=5)
                    for _ in range(3 - sum(1 for w in state["workers"] if w.get("state") == "ALIVE")):
                        cluster.add_worker()
                    Deadline(120).wait_until(lambda: backend.cluster().free_slots >= 3, interval=0.2)
                    row = one_run(spark, cluster, way, at, opts.step_secs)
                    rows.append(row)
                    ckpt = f"{row['checkpoint_s']:.2f}" if row["checkpoint_s"] is not None else "-"
                    print(f"{way:7} at step {at:3}: last step {row['last']:3}, resumed at {row['resumed']:3}, "
                          f"steps lost {row['lost']:3}, final {row['final']}, wall {row['wall']:.1f} s, "
                          f"after {row['after']:.1f} s, checkpoint {ckpt} s", flush=True)
        finally:
            spark.stop()
    print()
    medians = {}
    for way in ("notice", "anchor"):
        mine = [r for r in rows if r["way"] == way]
        medians[way] = {k: statistics.median(r[k] for r in mine) for k in ("lost", "wall", "after")}
        print(f"{way:7} median of {len(mine)}: steps lost {medians[way]['lost']:.0f}, wall "
              f"{medians[way]['wall']:.1f} s, after the event {medians[way]['after']:.1f} s")
    a, n = medians["anchor"], medians["notice"]
    print(f"anchor / notice: steps lost {a['lost']:.0f} / {n['lost']:.0f}, wall x{a['wall'] / n['wall']:.2f}, "
          f"after the event x{a['after'] / n['after']:.2f}")
    if opts.plot:
        plot(rows, opts.plot)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for way, colour in (("notice", "#15803d"), ("anchor", "#b91c1c")):
        mine = [r for r in rows if r["way"] == way]
        label = "decommission notice -> checkpoint" if way == "notice" else "lost, last periodic checkpoint"
        left.scatter([r["at"] for r in mine], [r["lost"] for r in mine], color=colour, label=label)
        right.scatter([r["at"] for r in mine], [r["after"] for r in mine], color=colour, label=label)
    left.set(xlabel="step when the executor leaves", ylabel="steps run again", title="steps lost")
    right.set(xlabel="step when the executor leaves", ylabel="seconds", title="from the event to the run's end")
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
