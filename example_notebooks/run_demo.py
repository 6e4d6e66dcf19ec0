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

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOK = "01_train_digits.ipynb"


def _echo(cell, cell_index: int, **_) -> None:
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
    work_dir = os.environ.setdefault("TFOS_WORK_DIR", os.path.join(tempfile.gettempdir(), "tfos-examples"))

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(os.path.join(HERE, NOTEBOOK), as_version=4)
    print(f"running example_notebooks/{NOTEBOOK} headless on local Spark (2 TensorFlow nodes)...", flush=True)
    started = time.monotonic()
    client = NotebookClient(nb, timeout=1800, kernel_name="python3", on_cell_executed=_echo,
                            resources={"metadata": {"path": HERE}})
    executed = os.path.join(work_dir, NOTEBOOK.replace(".ipynb", ".executed.ipynb"))
    try:
        client.execute(stderr=subprocess.DEVNULL)  # the kernel's own stderr: JVM start-up noise
    except CellExecutionError:
        print(f"\nthe notebook failed; the executed copy is {executed}", file=sys.stderr)
        return 1
    finally:
        os.makedirs(work_dir, exist_ok=True)
        nbformat.write(nb, executed)
    with open(os.path.join(work_dir, "01_train_digits.json")) as f:
        summary = json.load(f)
    print(f"""
done in {time.monotonic() - started:.0f} s
  held-out accuracy ({summary['data']}): {summary['accuracy']:.3f}
  loss per epoch:      {summary['loss_per_epoch']}
  exported model:      {summary['exported_model']}
  TensorBoard logs:    {summary['tensorboard_logdir']}
  executed notebook:   {executed}

To watch it live, with the monitor widget and the TensorBoard panel:
  make lab     then open example_notebooks/{NOTEBOOK} and run all cells
Or look at these logs now:  {sys.executable} -m tensorboard.main --logdir {summary['tensorboard_logdir']}""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
