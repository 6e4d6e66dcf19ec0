"""A driver process that exits while its tracked run goes on (a kernel shut down, a script that
returns) leaves its MLflow run KILLED, with why, not RUNNING: a real driver process on local[2]
Spark, logging to a ``sqlite:`` store."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

DRIVER = textwrap.dedent('''
    import sys, time
    from pyspark.sql import SparkSession
    from tfos_notebook import Run

    def train(args, ctx):
        import time
        for step in range(1, 10_000):
            ctx.report(step, loss=1.0 / step)
            time.sleep(0.2)

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    run = Run(spark.sparkContext, train, {}, 1, mlflow="exit-test").start()
    deadline = time.monotonic() + 120
    while not (run.tracking.mlflow_run_id and run.node_states().get("chief:0") == "running"):
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.2)
    print("MLFLOW_RUN", run.tracking.mlflow_run_id, flush=True)
    sys.exit(0)  # the process ends with the run going on
''')


@pytest.mark.slow
def test_a_driver_that_exits_mid_run_leaves_its_mlflow_run_killed(tmp_path, sqlite_tracking):
    from mlflow import MlflowClient

    done = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("MLFLOW_RUN "))
    run = MlflowClient(sqlite_tracking).get_run(run_id)
    assert run.info.status == "KILLED" and run.info.end_time
    assert run.data.tags["tfos.error"] == "the driver process exited while the run was running"
