"""InputMode.SPARK feeding throughput beside its anchor, in one run (by hand: ``python bench/feed.py``).

F1  rows/s per worker for MNIST-sized rows (784 float32 + an int64 label), 2 TensorFlow nodes on
    a standalone cluster of 2 workers x 2 cores, batches of 128, 2 epochs of 40,000 rows per
    worker (nodes buffer 16 MiB, far less than an epoch's share, so that an epoch measures steady
    feeding rather than a buffer filled while TensorFlow started). Every variant runs once per
    round, in a rotating order, for 3 rounds, so that a busy spell of the machine does not fall on
    one variant alone; the figure is the median over every (round, node, epoch) window:
      ours-df        a cached DataFrame through ``ctx.dataset`` (Arrow batches over the network)
      ours-rdd       a cached RDD of (numpy row, label) through ``ctx.dataset``
      ours-datafeed  the same RDD through our ``TFNode.DataFeed.next_batch`` (TFoS's loop)
      tfos-row       tensorflowonspark 2.2.5, its DataFeed, one pickled row per queue put
      tfos-chunk     tensorflowonspark 2.2.5 with 64 rows per RDD element (per put)
      ceiling        ``tf.data.Dataset.from_tensor_slices`` over the same rows in the node's memory
      spark-arrow    Spark's own Arrow read of the cached DataFrame (no-op ``mapInArrow`` on all
                     4 slots, no TensorFlow running), per worker: what any Spark-fed path is bound by
    Each probe runs as its own Spark application (bench/_feed_probe.py; tensorflowonspark in its own
    venv, see anchor_venv.sh) on the same cluster, one after the other. Goal: ours >= 20x
    tfos-row and >= 50% of the ceiling. Writes docs/feed_benchmark.png and bench/results/feed.json.

F2  (``--layout tfos``) the whole TensorFlowOnSpark program at its own layout (2 workers x 1 core),
    ours beside tensorflowonspark 2.2.5 and Spark's own no-op pass over the same data: see
    bench/_tfos_layout.py. Goals: the whole program (2 epochs of 40,000 rows) >= 8x faster than
    TFoS for RDDs and >= 10x for a DataFrame, within 1.5x of the no-op pass x N + the launch; every
    node's first step >= 3x sooner. ``--rounds 1 --append`` adds a round to the saved results.
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
sys.path.insert(0, str(HERE.parent))

from tfos_notebook.devcluster import StandaloneCluster  # noqa: E402

OURS = ("ours-df", "ours-rdd", "ours-datafeed")
ANCHOR = ("tfos-row", "tfos-chunk")
ROWS = ("ceiling", "spark-arrow", *OURS, "tfos-chunk", "tfos-row")
LABELS = {
    "ceiling": "tf.data from memory (ceiling)",
    "spark-arrow": "Spark's Arrow read alone (no-op)",
    "ours-df": "ours: DataFrame -> ctx.dataset",
    "ours-rdd": "ours: RDD -> ctx.dataset",
    "ours-datafeed": "ours: RDD -> DataFeed.next_batch",
    "tfos-chunk": "TFoS 2.2.5: 64 rows per put",
    "tfos-row": "TFoS 2.2.5: 1 row per put",
}


def probe(python: str, impl: str, master: str, opts, cores: int) -> dict[str, list[float]]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=python, TFOS_SERVER_HOST="127.0.0.1",
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(HERE.parent))
    cmd = [python, str(HERE / "_feed_probe.py"), "--impl", impl, "--master", master, "--workers", str(opts.workers),
           "--rows-per-worker", str(opts.rows_per_worker), "--epochs", str(opts.epochs), "--batch", str(opts.batch),
           "--cores", str(cores)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise RuntimeError(f"{impl} probe failed:\n{out.stderr[-4000:]}")
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    return {impl: [r for node in answer["rates"] for r in node], **answer["extra"]}


def plot(medians: dict[str, float], path: Path, note: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = [k for k in ROWS if k in medians]
    colors = {"ceiling": "#888888", "spark-arrow": "#bbbbbb", "tfos-row": "#d62728", "tfos-chunk": "#ff9896"}
    fig, ax = plt.subplots(figsize=(8, 3.6))
    values = [medians[k] for k in order]
    ax.barh([LABELS[k] for k in order], values, color=[colors.get(k, "#1f77b4") for k in order])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("rows/s per worker (median, log scale)")
    ax.set_title("InputMode.SPARK feeding, MNIST-sized rows (784 float32 + label)", fontsize=10)
    base = medians.get("tfos-row")
    for y, v in enumerate(values):
        ratio = f"  ({v / base:.1f}x TFoS 1-row)" if base else ""
        ax.text(v * 1.05, y, f"{v:,.0f}{ratio}", va="center", fontsize=8)
    ax.set_xlim(right=max(values) * 8)
    fig.text(0.01, 0.01, note, fontsize=7, color="#555555", wrap=True)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", choices=["feed", "tfos"], default="feed",
                        help="feed: F1 on 2 workers x 2 cores; tfos: F2 on TensorFlowOnSpark's 2 workers x 1 core")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows-per-worker", type=int, default=40000, help="F1: rows per worker per epoch")
    parser.add_argument("--rows", type=int, default=40000, help="F2: rows in all")
    parser.add_argument("--epochs", type=int, nargs="+", default=None,
                        help="epochs (F1: one figure, default 2; F2: one program each, default 2 10)")
    parser.add_argument("--data", nargs="+", choices=["lists", "numpy", "df"], default=["lists", "numpy", "df"],
                        help="F2: the kinds of data")
    parser.add_argument("--model", action="store_true", help="F2: nodes import TensorFlow and train a Keras model")
    parser.add_argument("--append", action="store_true", help="F2: add these rounds to the saved results")
    parser.add_argument("--big-rows", type=int, default=0,
                        help="F2: then ours once on a DataFrame of this many rows computed as read (never cached)")
    parser.add_argument("--big-memory", default="512m", help="F2: each executor's memory for --big-rows")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--skip-anchor", action="store_true")
    parser.add_argument("--plot", default=None, help="default docs/feed_benchmark.png (F1), docs/feed_tfos_layout.png (F2)")
    parser.add_argument("--from-json", help="print and plot saved results instead of measuring")
    opts = parser.parse_args()
    tfos_layout = opts.layout == "tfos"
    opts.plot = opts.plot or str(HERE.parent / "docs" / ("feed_tfos_layout.png" if tfos_layout else "feed_benchmark.png"))
    opts.epochs = opts.epochs or ([2, 10] if tfos_layout else [2])
    anchor_python = None
    if not opts.skip_anchor and not opts.from_json:
        anchor_python = subprocess.run(["bash", str(HERE / "anchor_venv.sh")], check=True, capture_output=True,
                                       text=True).stdout.strip().splitlines()[-1]
    if tfos_layout:
        import _tfos_layout

        _tfos_layout.main(opts, anchor_python)
        return
    opts.epochs = opts.epochs[0]
    if opts.from_json:
        saved = json.loads(Path(opts.from_json).read_text())
        report(saved["rates"], argparse.Namespace(**{**saved["opts"], "plot": opts.plot}), saved["loads"])
        return
    loads = [os.getloadavg()[0]]
    started = time.time()
    rates: dict[str, list[float]] = {}
    impls = ["ceiling", *OURS, *(ANCHOR if anchor_python else ())]
    with StandaloneCluster(workers=opts.workers, cores=2, memory="4g", gpus_per_worker=0) as cluster:
        for round_ in range(opts.rounds):
            for impl in impls[round_ % len(impls):] + impls[:round_ % len(impls)]:
                python = anchor_python if impl in ANCHOR else sys.executable
                for name, values in probe(python, impl, cluster.master_url, opts, 2).items():
                    rates.setdefault(name, []).extend(values)
                    loads.append(os.getloadavg()[0])
                    print(f"round {round_ + 1}  {name:22s} {statistics.median(values):>10,.2f} rows/s per worker  "
                          f"(load {loads[-1]:.1f})", flush=True)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    raw = results / "feed.json"
    raw.write_text(json.dumps({"opts": vars(opts), "loads": loads, "rates": rates,
                               "seconds": time.time() - started}, indent=1))  # first: a report error loses nothing
    report(rates, opts, loads)
    print(f"\nplot: {opts.plot}  raw: {raw}")


def report(rates: dict[str, list[float]], opts, loads: list[float]) -> dict[str, float]:
    """Print the table and draw the plot; returns the medians."""
    medians = {k: statistics.median(v) for k, v in rates.items()}
    base = medians.get("tfos-row")
    print(f"\nF1 feeding throughput, rows/s per worker (median of {opts.rounds} rounds x {opts.workers} nodes x "
          f"{opts.epochs} epochs, batch {opts.batch}, {opts.rows_per_worker} rows per worker per epoch)")
    print(f"{'':40s} {'rows/s':>10s} {'x TFoS 1-row':>13s} {'% of ceiling':>13s}")
    for impl in ROWS:
        if impl in medians:
            vs_tfos = f"{medians[impl] / base:.1f}x" if base else "-"
            ceiling = medians.get("ceiling")
            share = f"{100 * medians[impl] / ceiling:>12.0f}%" if ceiling else f"{'-':>13s}"
            print(f"{LABELS[impl]:40s} {medians[impl]:>10,.0f} {vs_tfos:>13s} {share}")
    note = (f"{opts.workers} TF nodes on a standalone cluster of {opts.workers} workers x 2 cores, on a 2-core "
            f"machine shared with other work (1-min load {min(loads):.1f} to {max(loads):.1f}); batch {opts.batch}; "
            f"{opts.rounds} rounds x {opts.epochs} epochs x {opts.rows_per_worker:,} rows per worker")
    print(note)
    plot({k: v for k, v in medians.items() if k in LABELS}, Path(opts.plot), note)
    return medians


if __name__ == "__main__":
    main()
