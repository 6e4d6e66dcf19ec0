"""F2 of bench/feed.py (``--layout tfos``): the whole TensorFlowOnSpark program at its own layout.

A standalone cluster of 2 workers x 1 core, as many task slots as nodes. Each probe
(bench/_program_probe.py) is a Spark application of its own that caches MNIST-sized rows (784
floats + an int label) as ``lists``, ``numpy`` or a ``df``, times Spark's own no-op pass over
them, then runs the program ``TFCluster.run``, ``train(data, N)``, ``shutdown`` for each N of
``--epochs`` with ours (in-stage) or tensorflowonspark 2.2.5 (its own venv), the nodes running
TFoS's ``DataFeed`` loop. Per program: the whole program's seconds, every node's first training
step after ``TFCluster.run``, and the driver's and the executors' peak RSS; for ours also the
launch of a program with no data and when each phase happened. The floor is Spark's no-op pass
times N plus our launch. Every (data, impl) pair runs once per round, in a rotating order.
Writes bench/results/feed_tfos_layout.json (``--append`` adds rounds to it) and
docs/feed_tfos_layout.png; ``--from-json`` redraws from it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = ("lists", "numpy", "df")
IMPLS = ("ours", "tfos")
LABELS = {"lists": "RDD of lists", "numpy": "RDD of numpy rows", "df": "DataFrame"}


def probe(python: str, impl: str, data: str, master: str, opts, *extra: str) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=python, TFOS_SERVER_HOST="127.0.0.1",
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(HERE.parent))
    cmd = [python, str(HERE / "_program_probe.py"), "--impl", impl, "--data", data, "--master", master,
           "--workers", str(opts.workers), "--rows", str(opts.rows), "--batch", str(opts.batch),
           "--epochs", *map(str, opts.epochs), *(["--model"] if opts.model else []), *extra]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{impl} {data} probe failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(opts, anchor_python: str | None, saved: dict) -> None:
    """Run the rounds on a fresh cluster, adding every probe's answer to ``saved["runs"]``."""
    from tfos_notebook.devcluster import StandaloneCluster

    pairs = [(d, i) for d in opts.data for i in IMPLS if i == "ours" or anchor_python]
    first = len(saved["runs"])
    with StandaloneCluster(workers=opts.workers, cores=1, memory="4g", gpus_per_worker=0) as cluster:
        for round_ in range(opts.rounds):
            shift = (first + round_) % len(pairs)
            for data, impl in pairs[shift:] + pairs[:shift]:
                answer = probe(anchor_python if impl == "tfos" else sys.executable, impl, data, cluster.master_url, opts)
                answer["load"] = os.getloadavg()[0]
                saved["runs"].append(answer)
                for p in answer["programs"]:
                    print(f"round {round_ + 1}  {impl:4s} {data:5s} N={p['epochs']:<2d} program {p['seconds']:6.2f} s  "
                          f"first step {max(p['first_step']):5.2f} s  (load {answer['load']:.1f})", flush=True)


def big(opts) -> dict:
    """Ours once, 2 epochs, on a DataFrame of ``opts.big_rows`` rows computed as it is read (never cached),
    each executor given ``opts.big_memory``: what the driver, the executors (JVM and the Python
    processes under it, the node's child included) and the disk (spill and shuffle files) held at
    their peaks."""
    from tfos_notebook.devcluster import StandaloneCluster

    row_bytes = 784 * 4 + 4
    with StandaloneCluster(workers=opts.workers, cores=1, memory="4g", gpus_per_worker=0) as cluster:
        answer = probe(sys.executable, "ours", "bigdf", cluster.master_url,
                       argparse.Namespace(**{**vars(opts), "rows": opts.big_rows, "epochs": [2]}),
                       "--executor-memory", opts.big_memory, "--partitions", str(4 * opts.workers))
    [p] = answer["programs"]
    out = {"rows": opts.big_rows, "data_mb": opts.big_rows * row_bytes / 2**20, "executor_memory": opts.big_memory,
           "epochs": p["epochs"], "seconds": p["seconds"], "rows_fed": p["rows"], "peak_mb": p["peak_mb"],
           "node_rss_mb": p["node_rss_mb"], "noop": answer["noop"][0], "load": os.getloadavg()[0]}
    executors = [v for k, v in p["peak_mb"].items() if k.startswith("executor")]
    print(f"\nbigger than memory: {out['rows']:,} rows ({out['data_mb']:,.0f} MiB as float32, "
          f"{out['data_mb'] / opts.workers:,.0f} MiB per node) never cached, executors of {opts.big_memory}; "
          f"{out['epochs']} epochs in {out['seconds']:.1f} s (Spark's no-op pass {out['noop']:.1f} s), rows fed per "
          f"node {out['rows_fed']}\npeak MiB: driver {p['peak_mb']['driver']:.0f}, executors "
          f"{', '.join(f'{v:.0f}' for v in executors)} (the JVM and its Python processes), the nodes' own "
          f"{', '.join(f'{v:.0f}' for v in out['node_rss_mb'])}, disk {p['peak_mb']['disk']:.0f} (spill and "
          f"shuffle files); load {out['load']:.1f}")
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(runs: list[dict]) -> dict:
    """Medians by (data, impl, epochs) over the rounds."""
    out: dict = {}
    for data in DATA:
        for impl in IMPLS:
            mine = [r for r in runs if r["data"] == data and r["impl"] == impl]
            if not mine:
                continue
            noop = _median([x for r in mine for x in r["noop"]])
            launch = _median([x for r in mine for x in r.get("launch", [])])
            for epochs in sorted({p["epochs"] for r in mine for p in r["programs"]}):
                programs = [p for r in mine for p in r["programs"] if p["epochs"] == epochs]
                out[(data, impl, epochs)] = {
                    "seconds": _median([p["seconds"] for p in programs]),
                    "first_step": _median([max(p["first_step"]) for p in programs]),
                    "driver_mb": _median([p["peak_mb"]["driver"] for p in programs]),
                    "executor_mb": _median([max(v for k, v in p["peak_mb"].items() if k.startswith("executor"))
                                            for p in programs]),
                    "noop": noop, "launch": launch, "rounds": len(programs),
                    "phases": _phases(programs) if impl == "ours" else None,
                }
    return out


def _phases(programs: list[dict]) -> dict:
    """When each phase of ours ended, median seconds after ``TFCluster.run``."""
    marks: dict[str, list[float]] = {}
    for p in programs:
        # before the barrier stage (the last): the sample row's one task, then the shuffle's map stage
        # or the job that gathers the partitions
        dealt = [st["completed"] for st in p["stages"][:-1] if st["tasks"] > 1 and st["completed"]]
        values = {"gang submitted": p["phases"].get("submitted"),
                  "data dealt out or gathered": max(dealt) if dealt else None,
                  "every node registered": max(p["phases"].get("registered", [0])),
                  "cluster ready (TF_CONFIG sent)": p["phases"].get("ready"),
                  "every function started": max(p["ready"]), "every node's first step": max(p["first_step"]),
                  "program ended": p["seconds"]}
        for k, v in values.items():
            if v is not None:
                marks.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in marks.items()}


def report(saved: dict, plot_path: Path) -> dict:
    runs = saved["runs"]
    med = summary(runs)
    loads = [r["load"] for r in runs]
    print(f"\nF2 the whole program at TensorFlowOnSpark's layout (2 workers x 1 core), {saved['opts']['rows']:,} rows "
          f"of 784 floats + label, medians of the rounds; load {min(loads):.1f} to {max(loads):.1f}")
    print(f"{'data':20s} {'N':>3s} {'TFoS 2.2.5':>11s} {'ours':>7s} {'x faster':>9s} {'no-op x N':>10s} "
          f"{'+ launch':>9s} {'ours/floor':>11s} {'rounds':>7s}")
    for (data, impl, epochs), m in med.items():
        if impl != "ours":
            continue
        tfos = med.get((data, "tfos", epochs))
        floor = m["noop"] * epochs + m["launch"]
        anchor = f"{tfos['seconds']:10.2f}s" if tfos else f"{'-':>11s}"
        ratio = f"{tfos['seconds'] / m['seconds']:8.1f}x" if tfos else f"{'-':>9s}"
        print(f"{LABELS[data]:20s} {epochs:3d} {anchor} {m['seconds']:6.2f}s {ratio} {m['noop'] * epochs:9.2f}s "
              f"{floor:8.2f}s {m['seconds'] / floor:10.2f}x {m['rounds']:7d}")
    print(f"\nevery node's first training step after TFCluster.run, and peak RSS (MiB)\n{'data':20s} {'N':>3s} "
          f"{'TFoS':>7s} {'ours':>7s} {'x sooner':>9s} {'driver TFoS':>12s} {'ours':>6s} {'executor TFoS':>14s} "
          f"{'ours':>6s}")
    for (data, impl, epochs), m in med.items():
        tfos = med.get((data, "tfos", epochs))
        if impl != "ours" or not tfos:
            continue
        print(f"{LABELS[data]:20s} {epochs:3d} {tfos['first_step']:6.2f}s {m['first_step']:6.2f}s "
              f"{tfos['first_step'] / m['first_step']:8.1f}x {tfos['driver_mb']:12.0f} {m['driver_mb']:6.0f} "
              f"{tfos['executor_mb']:14.0f} {m['executor_mb']:6.0f}")
    for (data, impl, epochs), m in med.items():
        if impl == "ours" and m["phases"]:
            print(f"\nours, {LABELS[data]}, N={epochs}: phases (s after TFCluster.run)")
            for k, v in m["phases"].items():
                print(f"  {k:40s} {v:6.2f}")
    plot(med, plot_path, f"load {min(loads):.1f} to {max(loads):.1f}")
    return med


def plot(med: dict, path: Path, note: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = sorted({e for (_, _, e) in med})
    panels = [(f"whole program, N={e} (s)", "seconds", e) for e in epochs] + [("first training step, N=2 (s)",
                                                                               "first_step", 2)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    for ax, (title, key, e) in zip(axes, panels, strict=True):
        rows = [d for d in DATA if (d, "ours", e) in med]
        y = range(len(rows))
        tfos = [med[(d, "tfos", e)][key] if (d, "tfos", e) in med else 0 for d in rows]
        ours = [med[(d, "ours", e)][key] for d in rows]
        ax.barh([i + 0.2 for i in y], tfos, height=0.4, color="#d62728", label="tensorflowonspark 2.2.5")
        ax.barh([i - 0.2 for i in y], ours, height=0.4, color="#1f77b4", label="tfos_notebook")
        if key == "seconds":
            floor = [med[(d, "ours", e)]["noop"] * e + med[(d, "ours", e)]["launch"] for d in rows]
            ax.scatter(floor, [i - 0.2 for i in y], marker="|", s=300, color="black", label="Spark no-op x N + launch")
        for i, (a, b) in enumerate(zip(tfos, ours, strict=True)):
            ax.text(b, i - 0.2, f" {b:.1f}" + (f" ({a / b:.1f}x)" if a else ""), va="center", fontsize=7)
            if a:
                ax.text(a, i + 0.2, f" {a:.1f}", va="center", fontsize=7)
        ax.set_yticks(list(y), [LABELS[d] for d in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
        ax.set_xlim(right=max(tfos + ours) * 1.35)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"TFCluster.run, train(data, N), shutdown at 2 workers x 1 core, MNIST-sized rows ({note})",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(opts, anchor_python: str | None) -> None:
    raw = HERE / "results" / "feed_tfos_layout.json"
    if opts.from_json:
        report(json.loads(Path(opts.from_json).read_text()), Path(opts.plot))
        return
    saved = json.loads(raw.read_text()) if opts.append and raw.exists() else {"opts": vars(opts), "runs": []}
    started = time.time()
    try:
        measure(opts, anchor_python, saved)
    finally:  # first: a report error, or a failed round, loses nothing measured
        raw.parent.mkdir(exist_ok=True)
        saved["seconds"] = saved.get("seconds", 0) + time.time() - started
        raw.write_text(json.dumps(saved, indent=1))
    if saved["runs"]:  # none with --rounds 0 and nothing saved: the big run alone
        report(saved, Path(opts.plot))
    if opts.big_rows:
        saved["big"] = big(opts)
        raw.write_text(json.dumps(saved, indent=1))
    print(f"\nplot: {opts.plot}  raw: {raw}")
