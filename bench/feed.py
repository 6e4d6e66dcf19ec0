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

F2  (``--layout tfos``) TensorFlowOnSpark's own layout: a standalone cluster of 2 workers x 1 core,
    as many task slots as nodes, so ours feeds in-stage (each node from its own task):
      ours-instage-datafeed  TFoS's program with our import: TFCluster.run, train(rdd), DataFeed
      ours-instage-df        Run.start(df, epochs) with ctx.dataset
      tfos-row / tfos-chunk  tensorflowonspark 2.2.5, same program, same cluster
      spark-noop-rdd         a no-op pass over the same RDD (rows unpickled and counted), per worker
      spark-arrow            Spark's Arrow read of the same DataFrame, per worker
    and the launch: TFCluster.run until it returns, and until every node registered (ours starts
    the gang inside train(), where the data arrives). Goals: feed >= 90% of the no-op pass and
    >= 5x tfos-row; launch >= 3x faster. Writes docs/feed_tfos_layout.png and
    bench/results/feed_tfos_layout.json.
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
INSTAGE = ("ours-instage-df", "ours-instage-datafeed")
ANCHOR = ("tfos-row", "tfos-chunk")
ROWS = ("ceiling", "spark-arrow", "spark-noop-rdd", *OURS, *INSTAGE, "tfos-chunk", "tfos-row")
LAUNCH = {"launch-ours-instage": "ours: TFCluster.run returns (the gang waits for train's data)",
          "ready-ours-instage-datafeed": "ours: TFCluster.run + train() until every node registered",
          "ready-ours-instage-df": "ours: Run.start(df) until every node registered",
          "launch-tfos-row": "TFoS 2.2.5: TFCluster.run (until every node registered)",
          "launch-tfos-chunk": "TFoS 2.2.5: TFCluster.run (64 rows per put run)"}
SPREAD = {"spread-ours-instage-datafeed": "ours: dealing the RDD out to the nodes (shuffle, once)",
          "spread-ours-instage-df": "ours: dealing the DataFrame out to the nodes (shuffle, once)"}
LABELS = {
    "spark-noop-rdd": "Spark's no-op pass over the RDD",
    "ours-instage-df": "ours in-stage: DataFrame -> ctx.dataset",
    "ours-instage-datafeed": "ours in-stage: TFoS program, DataFeed",
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
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows-per-worker", type=int, default=40000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--skip-anchor", action="store_true")
    parser.add_argument("--plot", default=str(HERE.parent / "docs" / "feed_benchmark.png"))
    parser.add_argument("--from-json", help="print and plot a saved bench/results/feed.json instead of measuring")
    parser.add_argument("--layout", choices=["feed", "tfos"], default="feed",
                        help="feed: F1 on 2 workers x 2 cores; tfos: F2 on TensorFlowOnSpark's 2 workers x 1 core")
    opts = parser.parse_args()
    tfos_layout = opts.layout == "tfos"
    if tfos_layout and opts.plot == parser.get_default("plot"):
        opts.plot = str(HERE.parent / "docs" / "feed_tfos_layout.png")
    if opts.from_json:
        saved = json.loads(Path(opts.from_json).read_text())
        report(saved["rates"], argparse.Namespace(**{**saved["opts"], "plot": opts.plot}), saved["loads"])
        return
    anchor_python = None
    if not opts.skip_anchor:
        anchor_python = subprocess.run(["bash", str(HERE / "anchor_venv.sh")], check=True, capture_output=True,
                                       text=True).stdout.strip().splitlines()[-1]
    loads = [os.getloadavg()[0]]
    started = time.time()
    rates: dict[str, list[float]] = {}
    impls = [*(INSTAGE if tfos_layout else ("ceiling", *OURS)), *(ANCHOR if anchor_python else ())]
    cores = 1 if tfos_layout else 2
    with StandaloneCluster(workers=opts.workers, cores=cores, memory="4g", gpus_per_worker=0) as cluster:
        for round_ in range(opts.rounds):
            for impl in impls[round_ % len(impls):] + impls[:round_ % len(impls)]:
                python = anchor_python if impl in ANCHOR else sys.executable
                for name, values in probe(python, impl, cluster.master_url, opts, cores).items():
                    rates.setdefault(name, []).extend(values)
                    loads.append(os.getloadavg()[0])
                    unit = "s" if name in LAUNCH or name in SPREAD else "rows/s per worker"
                    print(f"round {round_ + 1}  {name:22s} {statistics.median(values):>10,.2f} {unit}  "
                          f"(load {loads[-1]:.1f})", flush=True)
    medians = report(rates, opts, loads)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    raw = results / ("feed_tfos_layout.json" if tfos_layout else "feed.json")
    raw.write_text(json.dumps({"opts": vars(opts), "loads": loads, "rates": rates, "medians": medians,
                               "seconds": time.time() - started}, indent=1))
    print(f"\nplot: {opts.plot}  raw: {raw}")


def ceiling_of(impl: str, medians: dict[str, float]) -> str:
    """What ``impl`` is measured against: tf.data from memory (F1), else getting the same rows out of
    Spark at all (F2): the Arrow read for a DataFrame, the no-op pass for an RDD."""
    if "ceiling" in medians:
        return "ceiling"
    return "spark-arrow" if impl.endswith("-df") else "spark-noop-rdd"


def report(rates: dict[str, list[float]], opts, loads: list[float]) -> dict[str, float]:
    """Print the tables and draw the plot; returns the medians."""
    medians = {k: statistics.median(v) for k, v in rates.items()}
    tfos_layout = getattr(opts, "layout", "feed") == "tfos"
    base = medians.get("tfos-row")
    cores = 1 if tfos_layout else 2
    print(f"\n{'F2' if tfos_layout else 'F1'} feeding throughput, rows/s per worker (median of {opts.rounds} rounds x "
          f"{opts.workers} nodes x {opts.epochs} epochs, batch {opts.batch}, {opts.rows_per_worker} rows per worker "
          "per epoch)")
    print(f"{'':40s} {'rows/s':>10s} {'x TFoS 1-row':>13s} {'% of ceiling':>13s}")
    for impl in ROWS:
        if impl in medians:
            vs_tfos = f"{medians[impl] / base:.1f}x" if base else "-"
            ceiling = medians.get(ceiling_of(impl))
            share = f"{100 * medians[impl] / ceiling:>12.0f}%" if ceiling else f"{'-':>13s}"
            print(f"{LABELS[impl]:40s} {medians[impl]:>10,.0f} {vs_tfos:>13s} {share}")
    if any(k in medians for k in LAUNCH):
        anchor = medians.get("launch-tfos-row")
        print(f"\nlaunch, seconds (median of {opts.rounds} rounds)")
        for key, label in LAUNCH.items():
            if key in medians:
                faster = f"{anchor / medians[key]:.1f}x faster" if anchor and not key.startswith("launch-tfos") else ""
                print(f"{label:64s} {medians[key]:>7.2f}  {faster}")
    for key, label in SPREAD.items():
        if key in medians:
            print(f"{label:64s} {medians[key]:>7.2f} s for {opts.rows_per_worker * opts.workers:,} rows")
    note = (f"{opts.workers} TF nodes on a standalone cluster of {opts.workers} workers x {cores} core(s), on a 2-core "
            f"machine shared with other work (1-min load {min(loads):.1f} to {max(loads):.1f}); batch {opts.batch}; "
            f"{opts.rounds} rounds x {opts.epochs} epochs x {opts.rows_per_worker:,} rows per worker")
    print(note)
    plot({k: v for k, v in medians.items() if k in LABELS}, Path(opts.plot), note)
    return medians


if __name__ == "__main__":
    main()
