"""Soak: many launches in one SparkContext, and what the driver holds after each (by hand:
``python bench/soak.py --launches 300``; ``tests/runtime/driver/run/test_soak.py`` runs a short version).

Launches cycle through the ways a run ends: the function returns (``finish``), ``stop()`` mid-run
(``stop``), the function raises (``raise``), a node's training process is SIGKILLed and the run is
relaunched (``sigkill``), the nodes cannot register in time (``timeout``), and a DataFrame fed
in-stage in input mode spark (``feed``). Every run is entered in the runs registry, as a notebook's
are; every ``--tensorboard-every``-th launch also gets a TensorBoard that must end with its run.

After each launch the driver's open file descriptors, threads, listening ports and RSS (and the
JVM's RSS) are recorded; at the end the process table is scanned for anything of these runs
still alive. Writes a JSON of every sample and plots them (``docs/soak.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
from pyspark import cloudpickle

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tfos_notebook import Run, TFNode  # noqa: E402
from tfos_notebook.notebook import tracker  # noqa: E402
from tfos_notebook.runtime.driver.events import ClusterReady  # noqa: E402
from tfos_notebook.runtime.host.timeouts import Deadline  # noqa: E402
from tfos_notebook.tensorboard import attach_tensorboard, process  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # executors cannot import bench/

KINDS = ("finish", "stop", "raise", "sigkill", "timeout", "feed")
CHILD = "tfos_notebook.runtime.node.child.main"


# -- what the nodes run -----------------------------------------------------------------------
def quick(args, ctx):
    return ctx.task_index


def sleep_long(args, ctx):
    import time

    time.sleep(120)


def fail(args, ctx):
    raise ValueError("soak: the function failed")


def sleep_in_first_attempt(args, ctx):
    import time

    if ctx.attempt == 0:
        time.sleep(120)
    return ctx.attempt


def count_fed_rows(args, ctx):
    feed = TFNode.DataFeed(ctx.mgr)
    rows = 0
    while not feed.should_stop():
        rows += len(feed.next_batch(50))
    return rows


# -- one launch -------------------------------------------------------------------------------
@dataclass
class Sample:
    """The driver after one launch."""

    launch: int
    kind: str
    outcome: str
    secs: float
    fds: int
    threads: int
    os_threads: int
    listening: int
    rss_mib: float
    jvm_rss_mib: float


def _node_folder_run(proc: psutil.Process) -> str:
    """The run whose node's work folder ``proc`` works in (``tfos-RUN_ID-TASK-...``; "" for none):
    a node's process, forked (its environment is its worker's) or spawned."""
    name = os.path.basename(proc.cwd())
    return name.split("-", 1)[1].rsplit("-", 2)[0] if name.startswith("tfos-") and name.count("-") >= 3 else ""


def child_pids(run_ids: set[str]) -> list[int]:
    """Live processes of ``run_ids``: node children (by their work folder) and anything a node
    started (marked with ``TFOS_RUN_ID`` in its environment)."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            mark = p.environ().get("TFOS_RUN_ID") if p.pid != os.getpid() else None
            folder = _node_folder_run(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if mark in run_ids or folder in run_ids:
            found.append(p.pid)
    return found


def _wait_ready(run: Run, timeout: float = 60) -> None:
    if not run.events.wait_for(lambda evs: any(isinstance(e, ClusterReady) for e in evs), timeout):
        raise TimeoutError(f"run {run.name} did not get all its nodes within {timeout}s ({run.state})")


def _kill_worker_child(run: Run, timeout: float = 30) -> None:
    """SIGKILL worker 0's training process (task 1: its work folder is ``tfos-RUN_ID-1-...``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["pid"]):
            try:
                at_work = os.path.basename(p.cwd()).startswith(f"tfos-{run.run_id}-1-")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if at_work and ("TFOS_RUN_ID" not in p.environ() or CHILD in p.cmdline()):  # not what it started
                os.kill(p.pid, signal.SIGKILL)
                return
        time.sleep(0.05)
    raise TimeoutError(f"no training process of run {run.name} to kill")


def launch(spark, kind: str, tensorboard: bool = False) -> tuple[Run, str]:
    """One launch of ``kind`` on two nodes, tracked in the runs registry; returns the run and how it
    ended (its state, and the error's type for a failed one)."""
    sc = spark.sparkContext
    fn = {"finish": quick, "stop": sleep_long, "raise": fail, "sigkill": sleep_in_first_attempt,
          "timeout": quick, "feed": count_fed_rows}[kind]
    run = Run(sc, fn, None, 2, name=f"soak-{kind}", retries=1 if kind == "sigkill" else 0,
              reservation_timeout=0.01 if kind == "timeout" else 60, stop_grace_secs=2,
              input_mode="spark" if kind == "feed" else "tensorflow")
    tracker.track(run)
    board = attach_tensorboard(run, keep_after_run=0) if tensorboard else None
    try:
        if kind == "feed":
            run.start(spark.range(0, 500, numPartitions=2).selectExpr("id", "id * 2 AS x"), epochs=1)
        else:
            run.start()
        if kind == "stop":
            _wait_ready(run)
            run.stop()
        elif kind == "sigkill":
            _wait_ready(run)
            _kill_worker_child(run)
        try:
            value = run.wait(120)
        except Exception as e:  # the failing kinds end with their error
            return run, f"{run.state}:{type(e).__name__}"
        if kind == "feed" and sum(run.results.values()) != 500:
            raise AssertionError(f"fed 500 rows, the nodes read {run.results}")
        if kind == "sigkill" and value != 1:
            raise AssertionError(f"the killed run should have finished in attempt 1, got {value}")
        return run, str(run.state)
    finally:
        if board is not None:
            board.stop()


EXPECTED = {"finish": "finished", "stop": "stopped:RunStopped", "raise": "failed:NodeError",
            "sigkill": "finished", "timeout": "failed:ReservationTimeout", "feed": "finished"}


def sample(i: int, kind: str, outcome: str, secs: float) -> Sample:
    me = psutil.Process()
    listening = [c for c in me.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
    jvm = [p for p in me.children() if "java" in p.name()]
    return Sample(i, kind, outcome, round(secs, 2), me.num_fds(), threading.active_count(), me.num_threads(),
                  len(listening), me.memory_info().rss / 2**20,
                  sum(p.memory_info().rss for p in jvm) / 2**20)


def soak(spark, launches: int, tensorboard_every: int = 0, on_sample=None) -> tuple[list[Sample], dict[str, str]]:
    """``launches`` launches cycling through ``KINDS``; the samples, and each run's final state by
    run id (the runs themselves are let go, as a notebook lets go of old runs). Raises when a launch
    ends otherwise than its kind should."""
    samples, states = [], {}
    for i in range(launches):
        kind = KINDS[i % len(KINDS)]
        t0 = time.monotonic()
        run, outcome = launch(spark, kind, tensorboard=bool(tensorboard_every) and i % tensorboard_every == 0)
        states[run.run_id] = str(run.state)
        if outcome != EXPECTED[kind]:
            raise AssertionError(f"launch {i} ({kind}) ended {outcome}, expected {EXPECTED[kind]}: {run.error}")
        samples.append(sample(i, kind, outcome, time.monotonic() - t0))
        if on_sample:
            on_sample(samples[-1])
    return samples, states


def settle(run_ids: set[str], timeout: float = 15.0) -> list[int]:
    """Wait (bounded) until no process of ``run_ids`` is left; the pids still alive."""
    left = [child_pids(run_ids)]

    def gone() -> bool:
        left[0] = child_pids(run_ids)
        return not left[0]

    Deadline(timeout).wait_until(gone, interval=0.2)
    return left[0]


def tensorboards() -> list[int]:
    """Pids of TensorBoard processes this user's state directory knows of."""
    return [info.pid for info in process.running()]


# -- the benchmark ----------------------------------------------------------------------------
def plot(samples: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s["launch"] for s in samples]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    axes[0].plot(x, [s["fds"] for s in samples], label="open fds")
    axes[0].plot(x, [s["listening"] for s in samples], label="listening ports")
    axes[0].set_title("file descriptors")
    axes[1].plot(x, [s["threads"] for s in samples], label="Python threads")
    axes[1].plot(x, [s["os_threads"] for s in samples], label="OS threads")
    axes[1].set_title("threads")
    axes[2].plot(x, [s["rss_mib"] for s in samples], label="driver (Python)")
    axes[2].plot(x, [s["jvm_rss_mib"] for s in samples], label="driver JVM")
    axes[2].set_title("RSS (MiB)")
    for ax in axes:
        ax.set_xlabel("launch")
        ax.legend(fontsize=8)
        ax.set_ylim(bottom=0)
    fig.suptitle(f"{len(samples)} launches in one SparkContext (local[4]), cycling {', '.join(KINDS)}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=300)
    parser.add_argument("--tensorboard-every", type=int, default=50)
    parser.add_argument("--out", default=str(HERE.parent / "docs" / "soak.json"))
    parser.add_argument("--plot", default=str(HERE.parent / "docs" / "soak.png"))
    a = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[4]").appName("tfos-soak").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    out = Path(a.out)
    samples: list[dict] = []
    t0 = time.monotonic()

    def keep(s: Sample) -> None:  # written as it goes: a soak cut short still leaves its figures
        samples.append(asdict(s))
        out.write_text(json.dumps({"samples": samples, "secs": time.monotonic() - t0}, indent=0))
        print(json.dumps(asdict(s)), flush=True)

    _, states = soak(spark, a.launches, a.tensorboard_every, keep)
    left = settle(set(states))
    boards = tensorboards()
    first, last = samples[min(len(KINDS), len(samples) - 1)], samples[-1]
    summary = {"launches": len(samples), "secs": round(time.monotonic() - t0), "leftover_pids": left,
               "tensorboards": boards,
               **{f"{k}_after_warmup": first[k] for k in ("fds", "threads", "listening", "rss_mib", "jvm_rss_mib")},
               **{f"{k}_end": last[k] for k in ("fds", "threads", "listening", "rss_mib", "jvm_rss_mib")},
               "max": {k: max(s[k] for s in samples) for k in ("fds", "threads", "os_threads", "listening")}}
    out.write_text(json.dumps({"summary": summary, "samples": samples}, indent=0))
    plot(samples, Path(a.plot))
    print(json.dumps(summary, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
