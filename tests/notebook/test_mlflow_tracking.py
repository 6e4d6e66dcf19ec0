"""Runs logged to real MLflow: a tracking server over HTTP (``mlflow server`` with basic auth, whose
credentials only the driver holds) and local ``sqlite:`` stores, from ``%%tfos_train --mlflow`` on
local[2] Spark.

The first tests share one 2-worker Keras run (``tracked``), each checking other facts of it: the
cell calls ``mlflow.autolog()`` on every node and fits the usual multi-worker dataset, repeated
(whose description by autologging never ends, mlflow/mlflow#9600), reports its epochs through
``ctx.callbacks()``, exports its model with ``ctx.export`` and is evaluated with ``%%tfos_evaluate``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
from mlflowserver import PASSWORD, USERNAME
from nbhelpers import DIGITS_MWMS, LONG_CELL, TRAINING_HELPERS, child_processes, child_role, wait_until

from tfos_notebook.runtime.driver.errors import NodeError
from tfos_notebook.runtime.driver.events import FindingRaised, LaunchSubmitted, Log, NodeMemory, Step
from tfos_notebook.state import registry

EXPERIMENT = "tfos-tests"
CREDENTIALS = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")

TRACKED_CELL = '''
import os
import mlflow
mlflow.autolog()                      # on every node, as cells copied from single-node notebooks do
''' + DIGITS_MWMS + '''ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64).with_options(options)  # the usual
model.fit(ds, epochs=args.epochs, steps_per_epoch=5, callbacks=ctx.callbacks(tensorboard=False), verbose=0)
mlflow.log_metric(f"logged_on_{ctx.job_name}", 1.0, step=args.epochs)
ctx.export(model)
return {"accuracy": model.evaluate(ds, steps=5, verbose=0)[1], "uri": os.environ["MLFLOW_TRACKING_URI"],
        "credentials": sorted(set(os.environ) & set(CREDENTIALS))}
'''

# Reads the checkpoint's own tensors, whichever Keras this process imported first.
EVALUATE_CELL = '''
import numpy as np
import tensorflow as tf
reader = tf.train.load_checkpoint(checkpoint.path)
weights = [reader.get_tensor(name) for name, dtype in reader.get_variable_to_dtype_map().items()
           if dtype.is_floating and "optimizer" not in name]
return {"weight_norm": float(np.sqrt(sum((w.astype("float64") ** 2).sum() for w in weights))), "tensors": len(weights)}
'''


@pytest.fixture(scope="module")
def tracked(ip, module_local_spark, mlflow_server, tmp_path_factory):
    """One 2-worker run logged to the HTTP server, then evaluated; the driver holds the server's
    credentials (and a token), as a notebook's environment would."""
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("tracked")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TFOS_NOTEBOOK_STATE_DIR", str(root / "state"))
        for name, value in (("MLFLOW_TRACKING_URI", mlflow_server.url), ("MLFLOW_TRACKING_USERNAME", USERNAME),
                            ("MLFLOW_TRACKING_PASSWORD", PASSWORD), ("MLFLOW_TRACKING_TOKEN", "tfos-test-token")):
            mp.setenv(name, value)
        ip.user_ns["CREDENTIALS"] = CREDENTIALS
        assert ip.run_cell(TRAINING_HELPERS).success
        line = f"--workers 2 --epochs 2 --model-dir {root}/model --name tracked --monitor none --no-tensorboard"
        launched = ip.run_cell(f"%%tfos_train {line} --mlflow {EXPERIMENT}\n{TRACKED_CELL}")
        assert launched.success, launched.error_in_exec
        run = ip.user_ns["tracked"]
        result = run.wait(300)
        evaluation = ip.run_cell(f"%%tfos_evaluate tracked --every 1 --settle 0.5\n{EVALUATE_CELL}").result
        evaluation.wait(180)
        client = MlflowClient(mlflow_server.url)
        yield SimpleNamespace(run=run, result=result, client=client, mlflow=client.get_run(run.run.tracking.mlflow_run_id),
                              record=registry.get_run("tracked"), evaluation=evaluation)


def history(client, mlflow_run, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(mlflow_run.info.run_id, key)]


def test_a_two_worker_run_with_autolog_on_every_node_is_one_mlflow_run(tracked):
    experiment = tracked.client.get_experiment_by_name(EXPERIMENT)
    runs = tracked.client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [tracked.mlflow.info.run_id]
    run = tracked.mlflow
    assert (run.info.status, run.info.run_name) == ("FINISHED", "tracked")
    assert run.data.params["workers"] == "2" and run.data.params["epochs"] == "2"
    assert run.data.params["opt_name"] == "Adam"  # autolog's, relayed from the chief
    tags = run.data.tags
    assert (tags["tfos.run_id"], tags["tfos.nodes"], tags["tfos.roles"]) == (tracked.run.run_id, "2",
                                                                             "chief:0,worker:0")
    assert tags["tfos.spark_app_id"] == tracked.run.run.backend.conf("spark.app.id")
    assert "tfos.error" not in tags and "mlflow.parentRunId" not in tags


def test_autologging_on_the_nodes_left_the_repeated_dataset_alone_and_their_memory_flat(tracked):
    logs = "\n".join(e.line for e in tracked.run.events.events(Log))
    assert logs.count("MLflow autologging on this node logs params and metrics only (log_datasets, log_models off") == 2
    readings = tracked.run.events.events(NodeMemory)
    assert {r.name for r in readings} == {"chief:0", "worker:0"}
    assert max(r.rss_mib for r in readings) < 3072, max(r.rss_mib for r in readings)  # about 1 GiB each
    codes = {e.finding.code for e in tracked.run.events.events(FindingRaised)}
    assert "memory_growing" not in codes and "node_out_of_memory" not in codes
    assert not tracked.mlflow.inputs.dataset_inputs


def test_its_loss_is_the_chiefs_reported_curve_and_only_the_chiefs_mlflow_calls_count(tracked):
    chief = [(e.step, e.metrics["loss"]) for e in tracked.run.events.events(Step) if e.role == "chief"]
    assert [s for s, _ in chief] == [1, 2]
    assert history(tracked.client, tracked.mlflow, "loss") == chief
    metrics = tracked.mlflow.data.metrics
    assert metrics["logged_on_chief"] == 1.0 and "logged_on_worker" not in metrics
    assert metrics["final_accuracy"] == pytest.approx(tracked.result["accuracy"])


def test_both_nodes_have_system_metrics_under_mlflows_node_names(tracked):
    for node in ("chief_0", "worker_0"):
        for name in ("cpu_utilization_percentage", "system_memory_usage_megabytes", "system_memory_usage_percentage"):
            assert history(tracked.client, tracked.mlflow, f"system/{node}/{name}"), f"{node} {name}"


def test_the_exported_model_is_the_runs_mlflow_model_and_loads_with_the_tensorflow_flavor(tracked, mlflow_server):
    uri = f"runs:/{tracked.mlflow.info.run_id}/model"
    code = ("import sys, numpy, mlflow.tensorflow\n"
            f"model = mlflow.tensorflow.load_model({uri!r})\n"
            "print(type(model).__module__.split('.')[0], model.predict(numpy.zeros((3, 64)), verbose=0).shape)")
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_server.url, "MLFLOW_TRACKING_USERNAME": USERNAME,
           "MLFLOW_TRACKING_PASSWORD": PASSWORD, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "tf_keras (3, 10)"
    assert "tfos.model_error" not in tracked.mlflow.data.tags


def test_evaluation_metrics_land_in_the_same_mlflow_run(tracked):
    steps = [s for s, _ in tracked.evaluation.results]
    assert steps == [1, 2]
    assert history(tracked.client, tracked.mlflow, "eval_weight_norm") == [
        (s, m["weight_norm"]) for s, m in tracked.evaluation.results]
    assert [v for _, v in history(tracked.client, tracked.mlflow, "eval_tensors")] == [4.0, 4.0]  # 2 kernels, 2 biases


def test_the_nodes_hold_no_tracking_credentials_and_the_views_link_the_run(tracked, mlflow_server):
    nodes = tracked.run.results
    assert {name: (v["uri"], v["credentials"]) for name, v in nodes.items()} == {
        "chief:0": ("tfos-relay:chief", []), "worker:0": ("tfos-relay:muted", [])}
    url = f"{mlflow_server.url}/#/experiments/{tracked.mlflow.info.experiment_id}/runs/{tracked.mlflow.info.run_id}"
    assert (tracked.record.mlflow_run_id, tracked.record.mlflow_url) == (tracked.mlflow.info.run_id, url)
    assert tracked.run.run.tracking.error is None


def test_a_failing_run_inside_an_active_mlflow_run_is_its_failed_child(ip, local_spark, sqlite_tracking):
    import mlflow

    body = "if ctx.job_name == 'worker':\n    raise ValueError(f'bad digits {ctx.task_index}')\nreturn 1\n"
    with mlflow.start_run(run_name="notebook") as parent:
        result = ip.run_cell(f"%%tfos_train --workers 2 --mlflow --monitor none --no-tensorboard --wait\n{body}")
    assert isinstance(result.error_in_exec, NodeError)
    runs = mlflow.search_runs([parent.info.experiment_id], output_format="list")
    child = next(r for r in runs if r.info.run_id != parent.info.run_id)
    assert len(runs) == 2 and child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.info.status == "FAILED"
    error = child.data.tags["tfos.error"]
    assert error.startswith("the function failed on worker:0") and error.rstrip().endswith(
        "ValueError: bad digits 0")


def test_a_relaunched_run_stays_one_mlflow_run_and_a_stop_marks_it_killed(ip, local_spark, sqlite_tracking):
    import mlflow

    assert ip.run_cell(f"%%tfos_train --workers 2 --mlflow relaunched --name relaunched --monitor none "
                       f"--no-tensorboard\n{LONG_CELL}").success
    run = ip.user_ns["relaunched"]
    assert wait_until(lambda: len(child_processes(run.run_id)) == 2 and run.events.events(Step), 120)
    worker = next(p for p in child_processes(run.run_id) if child_role(p) == "worker:0")
    os.kill(worker.pid, signal.SIGKILL)  # the worker's process dies: the run is relaunched
    assert wait_until(lambda: [e.attempt for e in run.events.events(LaunchSubmitted)] == [0, 1]
                      and run.state == "running", 120)
    ip.run_line_magic("tfos_stop", "relaunched")
    assert run.state == "stopped" and run.run.tracking.wait(60)
    runs = mlflow.search_runs(experiment_names=["relaunched"], output_format="list")
    assert len(runs) == 1 and runs[0].info.run_id == run.run.tracking.mlflow_run_id
    assert (runs[0].info.status, runs[0].data.tags["tfos.attempts"]) == ("KILLED", "2")
