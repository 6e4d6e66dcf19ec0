"""``make demo``'s account of where the notebook's time went, from nbclient's cell timing and the
run's timeline (no kernel here: a notebook whose cells carry the timing nbclient records)."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat

RUN_DEMO = Path(__file__).resolve().parents[2] / "example_notebooks" / "run_demo.py"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def run_demo():
    spec = importlib.util.spec_from_file_location("run_demo", RUN_DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_cell(source: str, start: float, end: float):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["execution"] = {"iopub.status.busy": (T0 + timedelta(seconds=start)).isoformat(),
                                  "iopub.status.idle": (T0 + timedelta(seconds=end)).isoformat()}
    return cell


def test_the_demo_splits_its_time_into_start_up_and_training():
    nb = nbformat.v4.new_notebook(cells=[
        timed_cell("EPOCHS = 10", 0.5, 0.5),
        timed_cell("spark = SparkSession.builder.getOrCreate()", 0.5, 4.5),
        timed_cell("train_df = to_dataframe(spark, x, y)", 4.5, 7.5),
        timed_cell("%%tfos_train --name digits\n...", 7.5, 8.0),
        timed_cell("result = digits.wait()", 8.0, 20.0),
    ])
    at = T0.timestamp()
    timeline = {"started": at + 7.6, "submitted": at + 7.7, "registered": at + 10.0, "first_step": at + 14.0,
                "last_step": at + 18.5, "finished": at + 19.8}
    assert run_demo().split(nb, T0, 20.0, timeline).splitlines() == [
        "where the 20.0 s went (10.0 s of start-up before the nodes registered):",
        "  kernel start         0.5 s  nbclient starts an IPython kernel",
        "  Spark session        4.0 s  the JVM and a local SparkContext",
        "  data                 3.0 s  scikit-learn's digits into a cached DataFrame (Arrow), counted",
        "  nodes up             2.5 s  %load_ext, %%tfos_train, Spark's barrier tasks and Python workers, "
        "the nodes' processes",
        "  first epoch          4.0 s  each node ends its TensorFlow import (begun with its process), sets up MultiWorkerMirroredStrategy, runs epoch 1",
        "  other epochs         4.5 s  training",
        "  export, evaluation   1.3 s  every node saves the model; the held-out accuracy",
        "  the rest             0.2 s  the other cells",
    ]


def test_a_run_that_reached_no_step_leaves_the_nodes_phases_out_of_the_split():
    nb = nbformat.v4.new_notebook(cells=[timed_cell("spark = SparkSession.builder.getOrCreate()", 1.0, 5.0)])
    assert run_demo().split(nb, T0, 6.0, {"started": T0.timestamp() + 5.5}).splitlines() == [
        "where the 6.0 s went (5.0 s of start-up before the nodes registered):",
        "  kernel start         1.0 s  nbclient starts an IPython kernel",
        "  Spark session        4.0 s  the JVM and a local SparkContext",
        "  data                 0.0 s  scikit-learn's digits into a cached DataFrame (Arrow), counted",
        "  the rest             1.0 s  the other cells",
    ]
