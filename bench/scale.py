"""Scale by simulation (by hand: ``make bench-scale``): N simulated nodes against ONE real driver.

The driver side is the real thing: a ``Run`` with its ``Supervisor``, ``Coordinator``,
``ControlServer``, event stream and a TensorBoard ``Mirror`` as its event-file sink. Only Spark is
replaced, by ``simnodes.SimBackend``, whose nodes are protocol clients spread over a few
processes (see ``simnodes.py``). For each N, in a fresh driver process:

* registration: seconds from the nodes' release (all connect at once) to ``ClusterReady``;
* driver CPU seconds and RSS growth per node, up to all-registered and over the whole run;
* the peak number of driver threads;
* streaming: log lines and event-file bytes the driver took in per second between
  ``ClusterReady`` and the end of the run, and the driver's CPU use meanwhile (1.0 = one core:
  the GIL's ceiling, where the driver saturates).

Prints one table and plots registration time and driver memory against N into
``docs/scale_benchmark.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from simnodes import SimBackend, Workload  # noqa: E402

from tfos_notebook.runtime.driver.events import ClusterReady, Log, RunFinished  # noqa: E402
from tfos_notebook.runtime.driver.run.launch import Run  # noqa: E402
from tfos_notebook.tensorboard.mirror import Mirror  # noqa: E402

DEFAULT_NODES = (10, 100, 250, 500, 1000)


def simulated_run(nodes: int, procs: int, work: Workload, mirror_dir: str, timeout: float = 300.0) -> dict:
    """One run of ``nodes`` simulated nodes against a real driver, measured in this process."""
    me = psutil.Process()
    backend = SimBackend(nodes, procs, work)  # its processes have imported what they need
    mirror = Mirror(mirror_dir)
    lines = 0
    marks: dict[str, tuple[float, float, float]] = {}  # event -> (wall time, driver CPU s, RSS MiB)
    peak = {"rss": 0.0, "threads": 0}
    done = threading.Event()

    def cpu() -> float:
        t = me.cpu_times()
        return t.user + t.system

    def on_event(event) -> None:
        nonlocal lines
        if isinstance(event, Log):
            lines += 1
        elif isinstance(event, (ClusterReady, RunFinished)):
            marks[type(event).__name__] = (event.t, cpu(), me.memory_info().rss / 2 ** 20)

    def sample() -> None:
        while not done.wait(0.05):
            peak["rss"] = max(peak["rss"], me.memory_info().rss / 2 ** 20)
            peak["threads"] = max(peak["threads"], threading.active_count())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    run = Run(backend, lambda args, ctx: None, None, nodes, preflight_wait=0, reservation_timeout=timeout,
              retries=0, name=f"scale-{nodes}")
    run.set_file_sink(mirror.receive)
    run.events.subscribe(on_event, replay=False)
    rss0, cpu0 = me.memory_info().rss / 2 ** 20, cpu()
    run.start()
    result = run.wait(timeout)
    done.set()
    sampler.join()
    if result != nodes:
        raise RuntimeError(f"the chief returned {result!r}, expected {nodes}")
    ready_t, ready_cpu, ready_rss = marks["ClusterReady"]
    end_t, end_cpu, _ = marks["RunFinished"]
    stream_s = max(end_t - ready_t, 1e-6)
    mirrored = sum(f.stat().st_size for f in Path(mirror_dir).rglob("*") if f.is_file())
    expected_bytes = nodes * work.file_chunks * (work.chunk_bytes // 8 * 8)
    if mirrored != expected_bytes or lines != nodes * work.log_batches * work.lines_per_batch:
        raise RuntimeError(f"the driver got {lines} lines and mirrored {mirrored} bytes, expected "
                           f"{nodes * work.log_batches * work.lines_per_batch} and {expected_bytes}")
    return {
        "nodes": nodes,
        "register_s": round(ready_t - backend.go_at, 3),
        "max_handshake_s": round(max(s["max_handshake"] for s in backend.summaries), 3),
        "cpu_ms_per_node_registering": round(1000 * (ready_cpu - cpu0) / nodes, 3),
        "kib_per_node_registered": round(1024 * (ready_rss - rss0) / nodes, 1),
        "peak_rss_mib": round(peak["rss"], 1),
        "rss_growth_mib": round(peak["rss"] - rss0, 1),
        "peak_threads": peak["threads"],
        "total_s": round(end_t - backend.go_at, 3),
        "lines_per_s": round(lines / stream_s),
        "mib_per_s": round(mirrored / 2 ** 20 / stream_s, 2),
        "driver_cpu_streaming": round((end_cpu - ready_cpu) / stream_s, 2),
        "cpu_ms_per_node_total": round(1000 * (end_cpu - cpu0) / nodes, 3),
    }


def measure(nodes: int, procs: int, work: Workload) -> dict:
    """``simulated_run`` in a fresh driver process, so each N starts from the same memory."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, __file__, "--one", str(nodes), "--procs", str(procs),
                          "--work", json.dumps(asdict(work))], env=env, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"N={nodes} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(rows: list[dict], path: Path, note: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["nodes"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.plot(n, [r["register_s"] for r in rows], "o-", color="#1f77b4")
    left.axhline(10, color="#d62728", lw=0.8, ls="--")
    left.text(n[0], 10, " goal: 1,000 nodes in 10 s", va="bottom", fontsize=8, color="#d62728")
    left.set_xlabel("simulated nodes")
    left.set_ylabel("seconds to all registered")
    left.set_ylim(0, max(11.0, 1.1 * max(r["register_s"] for r in rows)))
    right.plot(n, [r["rss_growth_mib"] for r in rows], "o-", color="#2ca02c", label="RSS growth (MiB)")
    right.set_xlabel("simulated nodes")
    right.set_ylabel("driver RSS growth over the run (MiB)")
    right.set_ylim(bottom=0)
    for x, r in zip(n, rows, strict=True):
        right.annotate(f"{r['peak_threads']} thr", (x, r["rss_growth_mib"]), fontsize=7, xytext=(3, -10),
                       textcoords="offset points")
    fig.suptitle("One real driver (Run, Supervisor, ControlServer, mirror) vs N simulated nodes", fontsize=10)
    fig.text(0.01, 0.01, note, fontsize=7, color="#555555", wrap=True)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


COLUMNS = ("nodes", "register_s", "max_handshake_s", "cpu_ms_per_node_registering", "kib_per_node_registered",
           "peak_threads", "rss_growth_mib", "total_s", "lines_per_s", "mib_per_s", "driver_cpu_streaming")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=list(DEFAULT_NODES))
    parser.add_argument("--procs", type=int, default=4, help="processes the simulated nodes are spread over")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--work", default=json.dumps(asdict(Workload())), help="a Workload as JSON")
    parser.add_argument("--plot", type=Path, default=HERE.parent / "docs" / "scale_benchmark.png")
    args = parser.parse_args()
    work = Workload(**json.loads(args.work))
    if args.one:
        with tempfile.TemporaryDirectory(prefix="tfos-scale-") as mirror_dir:
            print(json.dumps(simulated_run(args.one, args.procs, work, mirror_dir)))
        return
    rows = []
    print("  ".join(COLUMNS))
    for nodes in args.nodes:
        rows.append(measure(nodes, args.procs, work))
        print("  ".join(str(rows[-1][c]) for c in COLUMNS), flush=True)
    note = (f"{os.cpu_count()} cores shared by the driver and {args.procs} node processes; per node: "
            f"{work.log_batches}x{work.lines_per_batch} log lines, {work.file_chunks}x{work.chunk_bytes >> 10} KiB "
            f"event-file chunks. python bench/scale.py --nodes {' '.join(map(str, args.nodes))}")
    plot(rows, args.plot, note)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
