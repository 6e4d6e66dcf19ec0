"""``make demo``: run 01_train_digits.ipynb headless on local Spark and say what it produced.

    .venv/bin/python example_notebooks/run_demo.py

The notebook runs in a real Jupyter kernel (nbclient), as it would in JupyterLab; without a widget
frontend its monitor prints ``[tfos]`` lines, which appear here cell by cell. Parameters come from
the environment (``TFOS_EPOCHS``, ``TFOS_WORKERS``, ``MNIST_PATH``, ``TFOS_WORK_DIR``...; see the
notebook's first cell). The executed notebook is saved next to the outputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOK = "01_train_digits.ipynb"


def _echo(cell) -> None:
    """Print what a cell printed (the monitor's ``[tfos]`` lines); Spark's stderr chatter stays in
    the executed notebook."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            sys.stdout.write(out.get("text", ""))
        elif out.get("output_type") == "error":
            sys.stdout.write(f"{out.get('ename')}: {out.get('evalue')}\n")
    sys.stdout.flush()


def main() -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TFOS_MONITOR", "text")
    # The demo's JVM lives about a minute and moves little data: the client compiler alone and the
    # serial collector start it sooner (a local session in 9.2 s instead of 11.5 s and its first
    # query in 4.9 s instead of 6.0 s, medians of 3 on the 2-core machine). A long-lived driver
    # that runs real ETL wants the JVM's defaults, which a notebook of its own keeps.
    os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    work_dir = os.environ.setdefault("TFOS_WORK_DIR", os.path.join(tempfile.gettempdir(), "tfos-examples"))

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(os.path.join(HERE, NOTEBOOK), as_version=4)
    executed = os.path.join(work_dir, NOTEBOOK.replace(".ipynb", ".executed.ipynb"))
    last = max(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")
    print(f"running example_notebooks/{NOTEBOOK} headless on local Spark (2 TensorFlow nodes)...", flush=True)
    started, started_at = time.monotonic(), datetime.now(timezone.utc)

    client = NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": HERE}})
    try:
        # cell by cell, so that each cell's lines show as it ends, with any nbclient (0.5 of
        # Databricks 14.3 and 15.4 calls its hooks as a cell starts)
        with client.setup_kernel(stderr=subprocess.DEVNULL):  # the kernel's own stderr: JVM start-up noise
            for index, cell in enumerate(nb.cells):
                try:
                    client.execute_cell(cell, index)
                finally:
                    _echo(cell)
                if index == last:  # the result at once: the kernel's shutdown (its Spark session, TensorBoard) comes after
                    report(nb, work_dir, executed, time.monotonic() - started, started_at)
    except CellExecutionError:
        print(f"\nthe notebook failed; the executed copy is {executed}", file=sys.stderr)
        return 1
    finally:
        os.makedirs(work_dir, exist_ok=True)
        nbformat.write(nb, executed)
    return 0


def report(nb, work_dir: str, executed: str, total: float, started_at: datetime) -> None:
    """What the notebook produced, and where its time went."""
    with open(os.path.join(work_dir, "01_train_digits.json")) as f:
        summary = json.load(f)
    print(f"""
done in {total:.0f} s
  held-out accuracy ({summary['data']}): {summary['accuracy']:.3f}
  loss per epoch:      {summary['loss_per_epoch']}
  exported model:      {summary['exported_model']}
  TensorBoard logs:    {summary['tensorboard_logdir']}
  executed notebook:   {executed}

To watch it live, with the monitor widget and the TensorBoard panel:
  make lab     then open example_notebooks/{NOTEBOOK} and run all cells
Or look at these logs now:  {sys.executable} -m tensorboard.main --logdir {summary['tensorboard_logdir']}
""")
    print(split(nb, started_at, total, summary.get("timeline", {})), flush=True)


def _cell_times(nb, started_at: datetime) -> list[tuple[str, float, float]]:
    """(first source line, start, end) of each executed code cell, in seconds from ``started_at``
    (nbclient records when the kernel went busy and idle for each cell)."""
    times = []
    for cell in nb.cells:
        execution = cell.get("metadata", {}).get("execution", {})
        if "iopub.status.busy" in execution and "iopub.status.idle" in execution:
            busy, idle = (datetime.fromisoformat(execution[k].replace("Z", "+00:00")).timestamp()
                          for k in ("iopub.status.busy", "iopub.status.idle"))
            times.append((cell.source, busy - started_at.timestamp(), idle - started_at.timestamp()))
    return times


def split(nb, started_at: datetime, total: float, timeline: dict[str, float]) -> str:
    """Where the notebook's time went: start-up (kernel, Spark, data, the nodes) against training,
    from the cells' timing and the run's ``timeline`` (its milestones' wall-clock times)."""
    cells = _cell_times(nb, started_at)
    marks = {name: t - started_at.timestamp() for name, t in timeline.items()}

    def cell(marker: str) -> tuple[float, float]:
        return next(((start, end) for source, start, end in cells if marker in source), (0.0, 0.0))

    spark, data = cell("SparkSession"), cell("to_dataframe(")
    rows = [("kernel start", cells[0][1] if cells else 0.0, "nbclient starts an IPython kernel"),
            ("Spark session", spark[1] - spark[0], "the JVM and a local SparkContext"),
            ("data", data[1] - data[0], "scikit-learn's digits into a cached DataFrame (Arrow), counted")]
    if {"registered", "first_step", "last_step", "finished"} <= marks.keys():
        rows += [("nodes up", marks["registered"] - data[1],
                  "%load_ext, %%tfos_train, Spark's barrier tasks and Python workers, the nodes' processes"),
                 ("first epoch", marks["first_step"] - marks["registered"],
                  "each node ends its TensorFlow import (begun with its process), sets up "
                  "MultiWorkerMirroredStrategy, runs epoch 1"),
                 ("other epochs", marks["last_step"] - marks["first_step"], "training"),
                 ("export, evaluation", marks["finished"] - marks["last_step"],
                  "every node saves the model; the held-out accuracy")]
    startup = sum(seconds for _, seconds, _ in rows[:4])  # up to the nodes registering
    rows.append(("the rest", total - sum(seconds for _, seconds, _ in rows), "the other cells"))
    lines = [f"where the {total:.1f} s went ({startup:.1f} s of start-up before the nodes registered):"]
    lines += [f"  {name:<19}{seconds:5.1f} s  {what}" for name, seconds, what in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
