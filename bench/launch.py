"""Launch benchmarks, each beside its anchor in the same run (by hand: ``make bench``).

P1  launch overhead: time from ``TFCluster.run`` to all N user functions started, minus a bare
    Spark barrier stage of N no-op tasks measured in the same application; ours and
    tensorflowonspark 2.2.5 (its own venv, see anchor_venv.sh), N=2 on a standalone cluster.
P2  time to a clear failure when 3 nodes are asked of 2 slots: our pre-flight against Spark's own
    barrier slot check at its default settings (``--spark-default`` measures it: about 10 minutes).
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


def probe(python: str, impl: str, master: str, nodes: int, runs: int) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=python, TFOS_SERVER_HOST="127.0.0.1")
    out = subprocess.run([python, str(HERE / "_launch_probe.py"), "--master", master, "--impl", impl,
                          "--nodes", str(nodes), "--runs", str(runs)],
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{impl} probe failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fail_fast(master: str, spark_default: bool) -> dict:
    from pyspark.sql import SparkSession

    from tfos_notebook import PreflightError, Run

    builder = (SparkSession.builder.master(master).appName("bench-failfast").config("spark.executor.cores", "1")
               .config("spark.cores.max", "2").config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1"))
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < 2:
        time.sleep(0.2)
    ours = []
    for _ in range(5):
        t0 = time.time()
        try:
            Run(sc, lambda a, c: None, None, 3).start()
        except PreflightError:
            ours.append(time.time() - t0)
    result = {"ours": ours}
    if spark_default:
        t0 = time.time()
        try:
            sc.parallelize(range(3), 3).barrier().mapPartitions(lambda it: [0]).collect()
        except Exception as e:  # BarrierJobSlotsNumberCheckFailed after the retries
            result["spark_error"] = str(e).splitlines()[0][:300]
        result["spark_default"] = time.time() - t0
    spark.stop()
    return result


def plot(result: dict, path: Path) -> None:
    """Every run's launch and bare barrier stage, ours beside the anchor's, with the medians."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p1 = result["p1"]
    series = [("tfos_notebook", p1["ours"], "#1f77b4")]
    if "anchor" in p1:
        series.append(("tensorflowonspark 2.2.5", p1["anchor"], "#d62728"))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    y = 0
    labels = []
    for name, runs, color in series:
        for kind, marker in (("bare", "o"), ("launch", "s")):
            values = runs[kind]
            ax.scatter(values, [y] * len(values), color=color, marker=marker, alpha=0.6)
            median = statistics.median(values)
            ax.plot([median, median], [y - 0.3, y + 0.3], color=color, linewidth=2)
            ax.text(median + 0.02, y + 0.28, f"{median:.3f} s", ha="left", fontsize=8)
            labels.append(f"{name}: {'bare barrier stage' if kind == 'bare' else 'launch to last function start'}")
            y += 1
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (each run a dot, the median a bar)")
    overhead = f"overhead: ours {p1['overhead_ours']:.3f} s"
    if "overhead_tfos" in p1:
        overhead += f", tensorflowonspark {p1['overhead_tfos']:.3f} s ({p1['overhead_tfos'] / p1['overhead_ours']:.1f}x)"
    ax.set_title(f"P1 launch, N=2 on a standalone cluster\n{overhead}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plot", default=str(HERE.parent / "docs" / "launch_benchmark.png"))
    parser.add_argument("--from-json", help="plot a saved bench/results/launch.json instead of measuring")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--spark-default", action="store_true", help="also measure Spark's own 3-of-2 failure")
    parser.add_argument("--skip-anchor", action="store_true")
    opts = parser.parse_args()
    if opts.from_json:
        plot(json.loads(Path(opts.from_json).read_text()), Path(opts.plot))
        return
    anchor_python = None
    if not opts.skip_anchor:
        anchor_python = subprocess.run(["bash", str(HERE / "anchor_venv.sh")], check=True, capture_output=True,
                                       text=True).stdout.strip().splitlines()[-1]
    with StandaloneCluster(workers=opts.nodes, cores=1, gpus_per_worker=0) as cluster:
        ours = probe(sys.executable, "ours", cluster.master_url, opts.nodes, opts.runs)
        anchor = probe(anchor_python, "tfos", cluster.master_url, opts.nodes, opts.runs) if anchor_python else None
        p2 = fail_fast(cluster.master_url, opts.spark_default)
    med = statistics.median
    rows = [("bare barrier stage (ours' app)", med(ours["bare"])), ("tfos_notebook launch", med(ours["launch"]))]
    over_ours = med(ours["launch"]) - med(ours["bare"])
    print(f"\nP1 launch, N={opts.nodes}, {opts.runs} runs each, medians (s)")
    for name, v in rows:
        print(f"  {name:40s} {v:7.3f}")
    print(f"  {'tfos_notebook overhead':40s} {over_ours:7.3f}   goal <= 1.0")
    result = {"p1": {"ours": ours, "overhead_ours": over_ours}, "p2": p2}
    if anchor:
        over_tfos = med(anchor["launch"]) - med(anchor["bare"])
        print(f"  {'bare barrier stage (anchor app)':40s} {med(anchor['bare']):7.3f}")
        print(f"  {'tensorflowonspark 2.2.5 launch':40s} {med(anchor['launch']):7.3f}")
        print(f"  {'tensorflowonspark 2.2.5 overhead':40s} {over_tfos:7.3f}")
        print(f"  {'ratio (anchor / ours)':40s} {over_tfos / over_ours:7.1f}x  goal >= 3")
        result["p1"].update(anchor=anchor, overhead_tfos=over_tfos)
    print("\nP2 time to a clear failure, 3 nodes on 2 slots (s)")
    print(f"  {'tfos_notebook pre-flight (median of 5)':40s} {med(p2['ours']):7.3f}   goal <= 5")
    if "spark_default" in p2:
        print(f"  {'Spark default barrier check (1 run)':40s} {p2['spark_default']:7.1f}")
        print(f"  {'ratio':40s} {p2['spark_default'] / med(p2['ours']):7.0f}x")
    else:
        print("  Spark default barrier check: not measured (--spark-default); configured as 40 checks x 15 s")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "launch.json").write_text(json.dumps(result, indent=1))
    plot(result, Path(opts.plot))
    print(f"\nplot: {opts.plot}  raw: {out / 'launch.json'}")


if __name__ == "__main__":
    main()
