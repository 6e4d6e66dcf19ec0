"""What a run puts in its MLflow run, and when a run is tracked: pure rules, no Spark, no server."""

from __future__ import annotations

import argparse
import importlib.util
import os

import pytest

from tfos_notebook.errors import ConfigError
from tfos_notebook.runtime.wire.plan import chief_of
from tfos_notebook.tracking import content as c
from tfos_notebook.tracking.batch import MAX_ENTITIES, Pending
from tfos_notebook.tracking.links import run_url
from tfos_notebook.tracking.settings import TrackingConfig, resolve

ROLES = [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]


def test_params_count_the_runs_nodes_and_name_the_functions_args():
    args = argparse.Namespace(lr=0.01, workers=3, layers=[64, 32], note=None, **{"batch size!": 64})
    params = c.run_params(ROLES, "spark", args)
    assert params == {"workers": "3", "ps": "1", "evaluator": "False", "input_mode": "spark", "lr": "0.01",
                      "layers": "[64, 32]", "batch size_": "64"}
    assert c.run_params(ROLES[:2], "tensorflow", {"workers": 5})["args.workers"] == "5"  # the run's count stays
    assert c.run_params(ROLES[:2], "tensorflow", [1, 2])["args"] == "[1, 2]"
    assert c.run_params(ROLES[:2], "tensorflow", {"long": "x" * 7000})["long"] == "x" * c.MAX_PARAM_VALUE


def test_the_chief_is_the_chief_or_worker_0_without_one():
    assert chief_of(ROLES) == ("chief", 0)
    assert chief_of([("worker", 0), ("worker", 1)]) == ("worker", 0)
    assert chief_of([("ps", 0), ("master", 0), ("worker", 0)]) == ("master", 0)


def test_system_metrics_follow_mlflows_per_node_names():
    assert c.cpu_metrics("worker_1", 55.0, 1200.0, 30.0) == {
        "system/worker_1/cpu_utilization_percentage": 55.0,
        "system/worker_1/system_memory_usage_megabytes": 1200.0,
        "system/worker_1/system_memory_usage_percentage": 30.0}
    assert c.gpu_metrics("chief_0", (("0", 87, 3072, 16384),)) == {
        "system/chief_0/gpu_0_utilization_percentage": 87.0,
        "system/chief_0/gpu_0_memory_usage_megabytes": pytest.approx(3221.225472),
        "system/chief_0/gpu_0_memory_usage_percentage": 18.75}


def test_the_chiefs_returned_numbers_are_final_metrics_beside_the_curves():
    value = {"accuracy": 0.93, "loss": 0.2, "name": "digits", "ok": True, "steps": 300}
    assert c.result_metrics(value, reported={"loss"}) == {"accuracy": 0.93, "final_loss": 0.2, "steps": 300.0}
    assert c.result_metrics([0.9], reported=set()) == {}


def test_a_metric_name_is_logged_from_the_first_source_that_logs_it():
    owners = c.MetricOwners()
    assert owners.keep("report", {"loss": 0.5}) == {"loss": 0.5}
    assert owners.keep("mlflow", {"loss": 0.5, "val_loss": 0.6}) == {"val_loss": 0.6}
    assert owners.keep("report", {"loss": 0.4, "val_loss": 0.5}) == {"loss": 0.4}
    assert owners.dropped == 2 and owners.owned() == {"loss", "val_loss"}


def test_status_and_error_tags():
    assert c.STATUS_OF_STATE == {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}
    long = "Traceback\n" + "x\n" * 6000 + "ValueError: bad"
    tag = c.error_tag(long)
    assert len(tag) <= c.MAX_TAG_VALUE and tag.startswith("Traceback") and tag.endswith("ValueError: bad")


def test_pending_values_are_cut_into_requests_mlflow_accepts():
    pending = Pending()
    pending.params.update({f"p{i}": "v" for i in range(150)})
    pending.tags["t"] = "v" * 8000
    pending.add_metrics({f"m{i}": 1.0 for i in range(2500)}, step=3, timestamp=1000)
    requests = list(pending.requests())
    assert all(len(r.params) <= 100 and len(r.metrics) + len(r.params) + len(r.tags) <= MAX_ENTITIES
               for r in requests)
    assert sum(len(r.params) for r in requests) == 150 and sum(len(r.metrics) for r in requests) == 2500
    assert len(pending) == 0 and list(pending.requests()) == []


def test_run_links_point_at_the_server_or_workspace_that_shows_the_run(monkeypatch):
    monkeypatch.delenv("DATABRICKS_HOST", raising=False)
    assert run_url("http://127.0.0.1:5000/", "3", "abc") == "http://127.0.0.1:5000/#/experiments/3/runs/abc"
    assert run_url("sqlite:////tmp/mlflow.db", "3", "abc") is None
    # the browser host of a Databricks context (recorded: there is no workspace here)
    assert run_url("databricks", "7", "abc", "adb-123.4.azuredatabricks.net") == (
        "https://adb-123.4.azuredatabricks.net/ml/experiments/7/runs/abc")
    assert run_url("databricks", "7", "abc") is None
    monkeypatch.setenv("DATABRICKS_HOST", "https://dbc-1.cloud.databricks.com/")  # a client off Databricks
    assert run_url("databricks", "7", "abc") == "https://dbc-1.cloud.databricks.com/ml/experiments/7/runs/abc"


def test_a_run_is_tracked_as_its_setting_and_the_environment_say(monkeypatch):
    monkeypatch.delenv("TFOS_MLFLOW", raising=False)
    assert resolve(None) is None and resolve(False) is None
    assert resolve(True) == TrackingConfig() and resolve("digits") == TrackingConfig("digits")
    monkeypatch.setenv("TFOS_MLFLOW", "on")
    assert resolve(None) == TrackingConfig() and resolve(False) is None
    monkeypatch.setenv("TFOS_MLFLOW", "maybe")
    with pytest.raises(ConfigError, match="TFOS_MLFLOW must be one of auto, on, off, got 'maybe'"):
        resolve(None)
    with pytest.raises(ConfigError, match="mlflow: the experiment name is empty"):
        resolve(" ")


def test_databricks_tracks_by_default_unless_its_autologging_is_off(monkeypatch):
    monkeypatch.delenv("TFOS_MLFLOW", raising=False)

    def unreadable(key: str):
        raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available.")

    assert resolve(None, on_databricks=True, conf=lambda key: None) == TrackingConfig()
    assert resolve(None, on_databricks=True, conf=unreadable) == TrackingConfig()
    assert resolve(None, on_databricks=True, conf={"spark.databricks.mlflow.autologging.enabled": "false"}.get) is None
    assert resolve(None, on_databricks=False, conf=lambda key: None) is None
    monkeypatch.setenv("TFOS_MLFLOW", "off")
    assert resolve(None, on_databricks=True) is None


def test_asking_for_mlflow_without_it_installed_fails_at_once_saying_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(ConfigError) as e:
        resolve("digits")
    assert str(e.value) == (
        "mlflow='digits' logs the run to MLflow, which is not installed here: pip install "
        "'tfos_notebook[mlflow]' (or pip install mlflow) on the driver, or turn it off (--no-mlflow, "
        "Run(..., mlflow=False), TFOS_MLFLOW=off)")
    monkeypatch.delenv("TFOS_MLFLOW", raising=False)
    assert resolve(None, on_databricks=True) is None  # the Databricks default needs MLflow: without it, no tracking


def test_deciding_that_a_run_is_not_tracked_imports_no_mlflow():
    # importing MLflow takes seconds: a launch outside Databricks, not asked to log, must not pay for it
    import json
    import subprocess
    import sys

    code = ("import json, sys\nfrom tfos_notebook.tracking.settings import resolve\n"
            "assert resolve(None) is None\nprint(json.dumps([m for m in sys.modules if m.split('.')[0] == 'mlflow']))")
    env = {k: v for k, v in os.environ.items() if k != "TFOS_MLFLOW"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert json.loads(out.stdout) == []
