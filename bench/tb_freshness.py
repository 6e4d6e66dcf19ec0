"""TensorBoard freshness benchmarks (by hand: ``python bench/tb_freshness.py``).

P4  time from a worker writing and flushing a scalar to that point being served by the driver
    TensorBoard's HTTP API (/data/plugin/scalars/scalars): 2 workers on a standalone cluster, their
    event files shipped over the control channel into the driver's mirror. Beside it, the same
    points read by a TensorBoard pointed straight at the workers' own files (possible only because
    workers and driver share this machine): what shipping and mirroring add.
P5  cost of one idle mirror tick over 10k event files, and of ticks that copy changed bytes; beside
    it, a naive pass that stats every file (what a plain rescan costs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tfos_notebook import Run  # noqa: E402
from tfos_notebook.devcluster import StandaloneCluster  # noqa: E402
from tfos_notebook.tensorboard import attach_tensorboard, process  # noqa: E402
from tfos_notebook.tensorboard.mirror import Mirror  # noqa: E402
from tfos_notebook.tensorboard.sources import LocalSource  # noqa: E402
from tfos_notebook.tensorboard.sync import MirrorSync  # noqa: E402

TAG = "fresh"


def emit_points(args, ctx):
    """Write one scalar, flush, pause; into the shipped log dir and into a directly read one."""
    import tensorflow as tf

    shipped = ctx.summary_writer()
    direct = tf.summary.create_file_writer(os.path.join(args["direct"], f"{ctx.job_name}_{ctx.task_index}"))
    rng = random.Random(ctx.task_index)
    time.sleep(args["warmup"])
    for step in range(args["points"]):
        for writer in (shipped, direct):
            with writer.as_default():
                tf.summary.scalar(TAG, float(step), step=step)
            writer.flush()
        time.sleep(args["spacing"] * (0.5 + rng.random()))


def _points(port: int, run: str) -> list:
    query = urllib.parse.urlencode({"run": run, "tag": TAG})
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?{query}", timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return []


def _watch(ports: dict[str, int], runs: list[str], expected: int, stop: threading.Event, poll: float) -> dict:
    """Latency of each point: the time it was first served minus its wall_time in the event."""
    seen: dict[str, dict[tuple[str, int], float]] = {label: {} for label in ports}
    while not stop.is_set():
        for label, port in ports.items():
            for run in runs:
                for wall, step, _value in _points(port, run):
                    seen[label].setdefault((run, step), time.time() - wall)
        if all(len(s) >= expected for s in seen.values()):
            break
        time.sleep(poll)
    return {label: list(s.values()) for label, s in seen.items()}


def p4(points: int, spacing: float, poll: float) -> dict:
    from pyspark.sql import SparkSession

    with StandaloneCluster(workers=2, cores=1, gpus_per_worker=0) as cluster:
        spark = (SparkSession.builder.master(cluster.master_url).appName("bench-tb-freshness")
                 .config("spark.executor.cores", "1").config("spark.cores.max", "2")
                 .config("spark.executor.memory", "1g").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
                 .getOrCreate())
        sc = spark.sparkContext
        while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < 2:
            time.sleep(0.2)
        direct_dir = tempfile.mkdtemp(prefix="bench-tb-direct-")
        args = {"direct": direct_dir, "points": points, "spacing": spacing, "warmup": 2.0}
        run = Run(sc, emit_points, args, 2, master_node=None)
        tb = attach_tensorboard(run)
        direct = process.start(direct_dir, reuse=False).info
        stop = threading.Event()
        result: dict = {}
        watcher = threading.Thread(target=lambda: result.update(
            _watch({"mirror": tb.port, "direct": direct.port}, ["worker_0", "worker_1"], 2 * points, stop, poll)))
        watcher.start()
        try:
            run.start()
            run.wait(600)
            watcher.join(timeout=60)
        finally:
            stop.set()
            watcher.join()
            tb.stop()
            process.stop(direct)
            spark.stop()
    return result


def _tree(root: Path, runs: int, files: int, size: int, age: float) -> list[Path]:
    paths = []
    old = time.time() - age
    for r in range(runs):
        d = root / f"worker_{r}" / "train"
        d.mkdir(parents=True)
        for i in range(files):
            p = d / f"events.out.tfevents.{i}.host"
            p.write_bytes(os.urandom(size))
            os.utime(p, (old, old))
            paths.append(p)
    return paths


def _timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _stat_everything(root: Path) -> None:
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.stat(os.path.join(dirpath, name))


def p5(runs: int, files: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-tb-p5-"))
    src = work / "src"
    paths = _tree(src, runs, files, 1024, age=3600)
    sync = MirrorSync(Mirror(str(work / "mirror")))
    sync.add(LocalSource(str(src)))
    t0 = time.perf_counter()
    copied = sync.tick(full=True)
    first = {"ms": (time.perf_counter() - t0) * 1000, "bytes": copied}
    result = {"files": len(paths), "first_copy": first, "idle_ms": _timed(sync.tick, 60),
              "stat_all_ms": _timed(lambda: _stat_everything(src), 10)}
    rng = random.Random(0)
    changed = []
    for k, nbytes in ((1, 1024), (10, 1024), (100, 1024), (1000, 1024), (1, 1 << 20), (1, 8 << 20)):
        chosen = rng.sample(paths, k)
        for p in chosen:  # make them the active writers: grown once and picked up
            with open(p, "ab") as f:
                f.write(b"x")
        sync.tick(full=True)
        for p in chosen:
            with open(p, "ab") as f:
                f.write(os.urandom(nbytes))
        t0 = time.perf_counter()
        got = sync.tick()
        changed.append({"files": k, "bytes": got, "expected": k * nbytes, "ms": (time.perf_counter() - t0) * 1000})
    result["changed"] = changed
    fresh = Path(tempfile.mkdtemp(prefix="bench-tb-p5-fresh-"))
    _tree(fresh / "src", runs, files, 1024, age=0)
    hot = MirrorSync(Mirror(str(fresh / "mirror")))
    hot.add(LocalSource(str(fresh / "src")))
    hot.tick(full=True)
    result["idle_all_recent_ms"] = _timed(hot.tick, 20)
    return result


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=30, help="scalars per worker (P4)")
    parser.add_argument("--spacing", type=float, default=1.0, help="mean seconds between a worker's scalars")
    parser.add_argument("--poll", type=float, default=0.05, help="seconds between HTTP polls of each run")
    parser.add_argument("--skip-p4", action="store_true")
    opts = parser.parse_args()
    result = {}
    print("P5 mirror tick over 10k event files (100 runs x 100 files), ms")
    r5 = p5(100, 100)
    result["p5"] = r5
    med = statistics.median
    print(f"  {'first copy of 10k files (10 MB)':44s} {r5['first_copy']['ms']:8.1f}")
    print(f"  {'idle tick, all files older than 10 s: p50':44s} {med(r5['idle_ms']):8.2f}   goal <= 50")
    print(f"  {'idle tick, all files older than 10 s: p95':44s} {_pct(r5['idle_ms'], 0.95):8.2f}")
    print(f"  {'idle tick, all 10k written in last 10 s: p50':44s} {med(r5['idle_all_recent_ms']):8.2f}")
    print(f"  {'anchor: stat every file, p50':44s} {med(r5['stat_all_ms']):8.2f}")
    for c in r5["changed"]:
        label = f"tick copying {c['files']} file(s) x {c['expected'] // c['files']} B"
        print(f"  {label:44s} {c['ms']:8.2f}   copied {c['bytes']} of {c['expected']} B")
    if not opts.skip_p4:
        r4 = p4(opts.points, opts.spacing, opts.poll)
        result["p4"] = r4
        print(f"\nP4 write+flush on a worker -> served by the driver TensorBoard, 2 workers, "
              f"{len(r4['mirror'])} points, s")
        print(f"  {'shipped + mirrored (ours): p50':44s} {med(r4['mirror']):8.2f}   goal <= 2")
        print(f"  {'shipped + mirrored (ours): p95':44s} {_pct(r4['mirror'], 0.95):8.2f}   goal <= 5")
        print(f"  {'anchor: TensorBoard on the files, p50':44s} {med(r4['direct']):8.2f}")
        print(f"  {'anchor: TensorBoard on the files, p95':44s} {_pct(r4['direct'], 0.95):8.2f}")
        print(f"  {'added by shipping + mirror (p50)':44s} {med(r4['mirror']) - med(r4['direct']):8.2f}")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "tb_freshness.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
